#!/usr/bin/env bash
# Builds agentr1's libFuzzer targets (clang, ASan + UBSan; see fuzz/CMakeLists.txt) and
# runs them.
#   bash fuzz/run.sh [SECONDS] [TARGET ...]   fuzz each target for SECONDS (default 60)
#   bash fuzz/run.sh --ci [TARGET ...]        CI's pass, reproducible: every committed seed
#                                             and regression input once, then FUZZ_RUNS
#                                             (default 3000) mutations from a fixed seed
# Targets: config tool_call tokenizer encode chat_template safetensors jsonl (default all).
# Inputs live in fuzz/seeds/<target>/ (committed: seeds, and every input that once
# crashed, as a regression); what fuzzing finds grows $FUZZ_DIR/corpus/<target>/; a
# crash is saved as $FUZZ_DIR/crashes/<target>-crash-<sha1> and the script exits 1.
# Re-run one input: $FUZZ_DIR/fuzz_<target> <file>.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_DIR=${FUZZ_DIR:-build-fuzz}
mode=time
seconds=60
if [[ ${1:-} == --ci ]]; then
  mode=ci
  shift
elif [[ ${1:-} =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
targets=("$@")
((${#targets[@]})) || targets=(config tool_call tokenizer encode chat_template safetensors jsonl)

bash scripts/apt_install.sh clang libclang-rt-14-dev cmake pkg-config \
  nlohmann-json3-dev libyaml-cpp-dev libpcre2-dev libutf8proc-dev
CXX=${FUZZ_CXX:-clang++} cmake -S fuzz -B "$FUZZ_DIR" >/dev/null
cmake --build "$FUZZ_DIR" -j"${JOBS:-2}" --target $(printf 'fuzz_%s ' "${targets[@]}") >/dev/null

mkdir -p "$FUZZ_DIR/crashes"
# -timeout: an input that takes over 10 s is a hang; -rss_limit_mb: over 2 GiB is a bug.
common=(-timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1)
status=0
for t in "${targets[@]}"; do
  bin="$FUZZ_DIR/fuzz_$t"
  log="$FUZZ_DIR/fuzz_$t.log"
  if [[ $mode == ci ]]; then
    # A fresh corpus directory each time, so the run depends on committed files only.
    work="$FUZZ_DIR/ci_corpus/$t"
    rm -rf "$work" && mkdir -p "$work"
    args=("${common[@]}" -seed=1 -runs="${FUZZ_RUNS:-3000}" "$work" "fuzz/seeds/$t")
  else
    mkdir -p "$FUZZ_DIR/corpus/$t"
    args=("${common[@]}" -max_total_time="$seconds" "$FUZZ_DIR/corpus/$t" "fuzz/seeds/$t")
  fi
  if "$bin" "${args[@]}" -artifact_prefix="$FUZZ_DIR/crashes/$t-" >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}')
    echo "fuzz_$t: ok, ${runs:-?} inputs"
  else
    echo "fuzz_$t: FAILED (log: $log)" >&2
    grep -E 'ERROR|SUMMARY|escaped|violated|threw|Test unit written' "$log" | head -8 >&2 || true
    status=1
  fi
done
exit $status
