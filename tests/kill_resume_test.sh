#!/usr/bin/env bash
# Crash safety of `agentr1 train`: SIGKILL at 20 moments of a run (rollout, update,
# checkpoint writing; a checkpoint every step so that many kills land in one), each
# followed by --resume. Checks after every kill that the checkpoint a resume would load
# is readable, and at the end that the run stopped at exactly the requested step count,
# that each step is logged once, and that the final weights equal an uninterrupted
# run's (within 1e-5: the engine batches decode by thread timing, so logits differ in
# the last float bits between runs; see train/checkpoint_test.cpp).
# usage: kill_resume_test.sh AGENTR1_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}

"$bin" init-model --arch qwen3 --tokenizer "$src/tests/fixtures/flow/tiny_qwen3" --hidden-size 32 \
  --intermediate-size 64 --layers 2 --heads 4 --kv-heads 2 --seed 5 --out "$tmp/model" >/dev/null || exit 1
steps=40
last=$(printf "step_%06d" $steps)
args=(model.path="$tmp/model" trainer.total_steps=$steps trainer.save_freq=1 trainer.test_freq=0
      trainer.threads=1 data.train_batch_size=2 data.val_size=1 rollout.n=3 rollout.val_k=0
      rollout.max_new_tokens=8 rollout.max_prompt_tokens=2048 rollout.max_steps=2 rollout.temperature=1.0
      actor.optim.lr=1e-3 actor.entropy_coeff=0.05 trainer.progress=false trainer.dump_trajectories=-1)

start=$(date +%s.%N)
"$bin" train "${args[@]}" trainer.output_dir="$tmp/whole" >"$tmp/whole.log" 2>&1 || { cat "$tmp/whole.log"; exit 1; }
whole_s=$(python3 -c "import time; print(round(time.time() - $start, 1))")
echo "     uninterrupted run: $whole_s s"

# The checkpoint a resume loads: the `latest` pointer's if complete, else the highest.
readable_latest() {
  local ck=$tmp/cut/checkpoints
  [[ -d $ck ]] || return 0  # killed before the first checkpoint: nothing to read yet
  local name
  name=$(cat "$ck/latest" 2>/dev/null || true)
  [[ -n $name && -f $ck/$name/trainer_state.json ]] || name=$(ls "$ck" | grep -E '^step_[0-9]+$' | sort | tail -1)
  [[ -n $name ]] || return 0
  python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$ck/$name/trainer_state.json" &&
    echo "[1, 2, 3]" | "$bin" score --model "$ck/$name" >/dev/null 2>&1
}

RANDOM=7  # the kill moments are the same every run
kills=0
unreadable=0
for i in $(seq 1 20); do
  mode=--overwrite  # nothing to resume yet (no complete checkpoint)
  ls "$tmp"/cut/checkpoints/step_*/trainer_state.json >/dev/null 2>&1 && mode=--resume
  "$bin" train "${args[@]}" trainer.output_dir="$tmp/cut" $mode >>"$tmp/cut.log" 2>&1 &
  pid=$!
  # 0.4-2.4 s after the start: start-up takes ~1 s, a step ~0.25 s, so each attempt
  # gets a few steps done and the kills land in rollouts, updates and checkpoint writes.
  delay=$(python3 -c "print(0.4 + ($RANDOM / 32767.0) * 2.0)")
  sleep "$delay"
  if kill -9 "$pid" 2>/dev/null; then kills=$((kills + 1)); fi
  wait "$pid" 2>/dev/null
  readable_latest || unreadable=$((unreadable + 1))
done
echo "     $kills of 20 kills landed before the run finished"
check "every checkpoint a resume would load was readable" test "$unreadable" -eq 0
"$bin" train "${args[@]}" trainer.output_dir="$tmp/cut" --resume >>"$tmp/cut.log" 2>&1
check "the final resume finishes" test $? -eq 0
check "at least 15 of the 20 kills interrupted the run" test "$kills" -ge 15

check "each step logged once, 1..$steps" python3 - "$tmp/cut/metrics.jsonl" "$steps" <<'EOF'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if l.strip() and "timing/gen" in l]
sys.exit(0 if steps == list(range(1, int(sys.argv[2]) + 1)) else (print(steps) or 1))
EOF
check "ends at exactly step $steps" python3 -c "import json,sys; sys.exit(0 if json.load(open('$tmp/cut/summary.json'))['steps'] == $steps else 1)"

# Final weights: the same as the uninterrupted run's, parsed from safetensors by hand.
check "final weights equal the uninterrupted run's" python3 - "$tmp/whole/checkpoints/$last/model.safetensors" \
  "$tmp/cut/checkpoints/$last/model.safetensors" "$tmp/model/model.safetensors" <<'EOF'
import array, json, struct, sys
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__": continue
        assert v["dtype"] == "F32", v["dtype"]
        s, e = v["data_offsets"]
        out[k] = array.array("f", b[8 + n + s:8 + n + e])
    return out
a, c, init = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
assert a.keys() == c.keys()
diff = max(max(abs(x - y) for x, y in zip(a[k], c[k])) for k in a)
moved = max(max(abs(x - y) for x, y in zip(a[k], init[k])) for k in a)
print(f"     max |whole - resumed| = {diff:.3g}, max |whole - initial| = {moved:.3g}")
sys.exit(0 if diff < 1e-5 and moved > 1e-4 else 1)
EOF
[[ $fail -eq 0 ]] || { echo "--- cut.log (tail)"; tail -20 "$tmp/cut.log"; }
exit $fail
