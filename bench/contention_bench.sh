#!/usr/bin/env bash
# contention_bench — the built-in default job's RL step time on an idle machine and with
# one busy-loop process beside it (another program holding one core: a tool, a judge, a
# second job), side by side: idle, busy, idle, busy, ... and the same with the thread
# count fixed (trainer.threads=N, the old behaviour) for comparison.
#
#   bash bench/contention_bench.sh [--steps 6] [--rounds 2] [--fixed-threads 2] [--bin build/agentr1]
#
# Each run: `agentr1 train` (the built-in default; its SFT model must exist, as after
# `make run`), trainer.total_steps=--steps, validation only at start and end; the median
# of timing/step over steps 2.. is kept. Validates first: every run wrote its steps and
# the busy loop was alive when its run ended. Prints the medians (best round of each
# case) and the busy/idle ratios.
set -euo pipefail
steps=6 rounds=2 fixed=2 bin=build/agentr1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --fixed-threads) fixed=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    *) echo "contention_bench: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ -x "$bin" ]] || { echo "contention_bench: no binary at '$bin' (HINT: make test, or --bin PATH)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/agentr1_contention.XXXXXX)
trap 'rm -rf "$tmp"; [[ -n "${busy:-}" ]] && kill "$busy" 2>/dev/null || true' EXIT

# run NAME BUSY(0|1) [overrides...] -> prints the median step time
run() {
  local name=$1 with_busy=$2; shift 2
  busy=""
  if [[ $with_busy == 1 ]]; then
    bash -c 'while :; do :; done' &
    busy=$!
  fi
  "$bin" train trainer.total_steps="$steps" trainer.test_freq=0 trainer.progress=false \
    trainer.output_dir="$tmp/$name" --overwrite "$@" >"$tmp/$name.log" 2>&1 ||
    { echo "FAIL: run $name failed; its log:" >&2; tail -20 "$tmp/$name.log" >&2; exit 1; }
  if [[ -n $busy ]]; then
    kill -0 "$busy" 2>/dev/null || { echo "FAIL: the busy loop died during $name" >&2; exit 1; }
    kill "$busy"; wait "$busy" 2>/dev/null || true
    busy=""
  fi
  python3 - "$tmp/$name/metrics.jsonl" "$steps" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"timing/step"' in l]
steps = [r for r in rows if r.get("step", 0) >= 2]
if len(rows) != int(sys.argv[2]) or not steps:
    sys.exit(f"FAIL: {sys.argv[1]} has {len(rows)} steps, expected {sys.argv[2]}")
print(f"{statistics.median(r['timing/step'] for r in steps):.3f}")
PY
}

declare -A best
keep() { local k=$1 v=$2; [[ -z "${best[$k]:-}" ]] && best[$k]=$v || best[$k]=$(python3 -c "print(min($v, ${best[$k]}))"); }
echo "contention_bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  keep "auto idle" "$(run auto-idle-$r 0)"
  keep "auto busy" "$(run auto-busy-$r 1)"
  keep "fixed idle" "$(run fixed-idle-$r 0 trainer.threads="$fixed")"
  keep "fixed busy" "$(run fixed-busy-$r 1 trainer.threads="$fixed")"
done
echo
echo "| threads | idle s/step | one core busy s/step | busy / idle |"
echo "|---|--:|--:|--:|"
for k in auto fixed; do
  label=$([[ $k == auto ]] && echo "trainer.threads=0 (free cores, the default)" || echo "trainer.threads=$fixed (fixed)")
  python3 -c "i, b = ${best[$k idle]}, ${best[$k busy]}; print(f'| $label | {i:.2f} | {b:.2f} | {b / i:.2f}x |')"
done
