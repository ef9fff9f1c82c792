#!/usr/bin/env bash
# Installs everything agentr1 needs on Debian 12 and configures + builds it.
# Idempotent: packages already present are skipped, the build is incremental.
#   bash scripts/setup.sh            # release build in build/
#   BUILD_DIR=build-dbg BUILD_TYPE=Debug bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}
JOBS=${JOBS:-2}

PACKAGES=(
  build-essential cmake pkg-config git
  libtorch-dev libopenblas0-openmp libgloo-dev
  nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libpcre2-dev libutf8proc-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev
  python3 python3-torch python3-jinja2 python3-numpy
  gnuplot-nox
  # Test references: TensorBoard event files read with protobuf's own parser; the run
  # viewer (agentr1 view) driven in a real headless browser (playwright-core from npm).
  python3-protobuf chromium fonts-dejavu-core
)
# Node.js and npm: only from Debian when the machine has none (a Node.js installed
# another way ships its own npm, and Debian's npm package conflicts with it).
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

bash scripts/apt_install.sh "${PACKAGES[@]}"

# Reference implementations used only by tests (tokenizer / chat-template parity, GGUF
# reading, llama.cpp's prebuilt CPU build for the GGUF export test, playwright-core for the
# viewer's browser test).
# Every package named in tests/ref/package.json must be there (a checkout that adds one
# installs it again).
missing_ref=0
for pkg in $(sed -n 's/^ *"\([^"]*\)": *"[0-9][^"]*",\{0,1\}$/\1/p' tests/ref/package.json); do
  [[ -d tests/ref/node_modules/$pkg ]] || missing_ref=1
done
if [[ $missing_ref == 1 ]]; then
  (cd tests/ref && npm ci --no-audit --no-fund --loglevel=error)
fi

# CMAKE_ARGS: extra options, e.g. "-DAGENTR1_SANITIZE=ON" (make test-sanitize).
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS"
