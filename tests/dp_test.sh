#!/usr/bin/env bash
# Data parallelism end to end (`agentr1 launch`, Gloo on 127.0.0.1), on a tiny model:
#  1. GRPO, PPO with a critic, KL in the reward and a scoring pass, and GRPO with online
#     policy distillation from a second model (k1_pg plus the task's advantage, and
#     topk_fkl, whose top-k ids and log-probs the ranks share; the teacher's log-probs
#     and the distillation losses compared as losses are): 2 ranks give the
#     same trajectories (every token of every step, and step 1's behaviour log-probs, all
#     compared exactly) as 1 process with
#     the same global batch and seed, the same gradient norms and losses in step 1 (to
#     1e-4 relative; 1e-2 in later steps), and the same final weights: within 1e-5 for GRPO; within 2e-3
#     (2 x lr) for PPO, because the ranks add the same gradient terms in another order
#     and Adam turns last-bit differences of near-zero gradients into steps of up to lr
#     (the gradient norms above show the update itself agrees).
#  2. A rank killed by SIGKILL mid-run: the other exits non-zero within seconds, naming
#     it; `--resume` with 2 ranks then finishes the run, each step logged once.
#  3. A rank that hangs (SIGSTOP): the other fails after trainer.dist.timeout_s, naming it.
# usage: dp_test.sh AGENTR1_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}

"$bin" init-model --arch qwen3 --tokenizer "$src/tests/fixtures/flow/tiny_qwen3" --hidden-size 32 \
  --intermediate-size 64 --layers 2 --heads 4 --kv-heads 2 --seed 5 --out "$tmp/model" >/dev/null || exit 1
base=(model.path="$tmp/model" trainer.test_freq=2 data.train_batch_size=4 data.val_size=4 rollout.n=3
      rollout.val_k=0 rollout.max_new_tokens=8 rollout.max_prompt_tokens=2048 rollout.max_steps=2
      rollout.temperature=1.0 actor.optim.lr=1e-3 actor.entropy_coeff=0.05 trainer.progress=false
      trainer.dump_trajectories=-1 actor.ppo_mini_batch_size=6 actor.micro_batch_size=2 trainer.dist.check_freq=1)
grpo=(trainer.total_steps=3)
ppo=(trainer.total_steps=4 algorithm.adv_estimator=gae algorithm.use_kl_in_reward=true
     algorithm.kl_ctrl.type=adaptive algorithm.kl_ctrl.kl_coef=0.5 actor.use_rollout_logprobs=false
     critic.optim.lr=1e-2)
# Online policy distillation (k1_pg) from a teacher with other weights: each rank scores
# its own rows with the teacher, then the columns are shared.
"$bin" init-model --arch qwen3 --tokenizer "$src/tests/fixtures/flow/tiny_qwen3" --hidden-size 32 \
  --intermediate-size 64 --layers 2 --heads 4 --kv-heads 2 --seed 6 --out "$tmp/teacher" >/dev/null || exit 1
opd=(trainer.total_steps=3 algorithm.distill.teacher="$tmp/teacher" algorithm.distill.use_task_rewards=true)
# The top-k forward KL: the teacher's top-k ids and log-probs are shared between ranks too.
opd_topk=("${opd[@]}" algorithm.distill.loss=topk_fkl algorithm.distill.topk=8 algorithm.distill.coef=0.5)

compare() {  # compare ONE TWO PARAM_TOL
  python3 - "$1" "$2" "$3" <<'EOF'
import array, glob, json, os, struct, sys
one, two, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
def trajs(d):
    out = {}
    for f in sorted(glob.glob(d + "/trajectories/*.jsonl")):
        for l in open(f):
            j = json.loads(l)
            out[(os.path.basename(f), j["uid"])] = [(s["prompt_ids"], s["response_ids"]) for s in j["steps"]]
    return out
a, b = trajs(one), trajs(two)
ok = len(a) > 0 and a == b
print("     %d trajectories (training and validation) %s" % (len(a), "identical" if a == b else "DIFFER"))
# Step 1 samples from the initial weights in both runs, on batch-invariant engines (the
# default): its behaviour log-probs are the same bits, whatever each engine batched.
# (Later steps sample from weights the two runs updated in another summation order.)
def logprobs(d):
    return {(j["uid"], i): s["response_logprobs"] for j in map(json.loads, open(d + "/trajectories/step_000001.jsonl"))
            for i, s in enumerate(j["steps"])}
la, lb = logprobs(one), logprobs(two)
print("     step 1 behaviour log-probs (%d turns) %s" % (len(la), "identical" if la == lb else "DIFFER"))
ok = ok and len(la) > 0 and la == lb
def steps(d):
    return {j["step"]: j for j in map(json.loads, open(d + "/metrics.jsonl")) if "timing/gen" in j}
ma, mb = steps(one), steps(two)
ok = ok and sorted(ma) == sorted(mb) and len(ma) > 0
# Step 1 starts from the same weights: its gradient norms and losses agree to rounding.
# Later steps start from weights that Adam has already made differ (see the header), so
# they are held to 1e-2 only (a gradient summed wrongly is off by a factor of 2).
worst = {1: 0.0, 2: 0.0}
for s in ma:
    for k in ("actor/grad_norm", "critic/grad_norm", "actor/pg_loss", "critic/vf_loss", "actor/entropy",
              "distill/reverse_kl", "distill/teacher_logprob", "distill/topk_fkl", "distill/topk_mass"):
        if k in ma[s]:
            x, y = ma[s][k], mb[s].get(k, float("nan"))
            d = abs(x - y) / max(abs(x), 1e-3)
            worst[min(s, 2)] = max(worst[min(s, 2)], d) if d == d else float("inf")
print("     gradient norms and losses: step 1 max relative difference %.2g, later steps %.2g" % (worst[1], worst[2]))
ok = ok and worst[1] < 1e-4 and worst[2] < 1e-2
def tensors(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]
        out[k] = array.array("f", raw[8 + n + s:8 + n + e])
    return out
last = sorted(glob.glob(one + "/checkpoints/step_*"))[-1].split("/")[-1]
pa, pb = tensors(f"{one}/checkpoints/{last}/model.safetensors"), tensors(f"{two}/checkpoints/{last}/model.safetensors")
d = max(max(abs(x - y) for x, y in zip(pa[k], pb[k])) for k in pa)
print("     final weights: max |difference| %.2g (tolerance %g)" % (d, tol))
sys.exit(0 if ok and d <= tol and pa.keys() == pb.keys() else 1)
EOF
}

for algo in grpo ppo opd opd_topk; do
  declare -n extra=$algo
  "$bin" train "${base[@]}" "${extra[@]}" trainer.threads=2 trainer.output_dir="$tmp/$algo-1" >"$tmp/$algo-1.log" 2>&1 ||
    { cat "$tmp/$algo-1.log"; exit 1; }
  "$bin" launch --nproc 2 train "${base[@]}" "${extra[@]}" trainer.output_dir="$tmp/$algo-2" >"$tmp/$algo-2.log" 2>&1 ||
    { cat "$tmp/$algo-2.log"; exit 1; }
  # Weights after Adam: a gradient entry near zero is normalised to a step of up to lr,
  # so gradients equal to rounding (checked above: 1e-4 at step 1, 1e-2 later) can move
  # single weights by a small fraction of lr (1e-3; the critic's 1e-2). Measured
  # 2026-12-05 with the learner's tiled attention (rows over 256 tokens): 1.1e-5 (grpo)
  # and 3.1e-3 (ppo); with dense attention 4.1e-6 (grpo). A gradient summed wrongly
  # fails the gradient-norm check long before this one.
  tol=3e-5
  [[ $algo == ppo ]] && tol=6e-3
  check "$algo: 2 ranks = 1 process (trajectories, per-step gradients, weights)" compare "$tmp/$algo-1" "$tmp/$algo-2" $tol
  check "$algo: rank 0 alone wrote the run" test "$(grep -c '"step"' "$tmp/$algo-2/metrics.jsonl")" -eq \
    "$(grep -c '"step"' "$tmp/$algo-1/metrics.jsonl")"
done

# 2. A rank killed mid-run.
slow=(model.path="$tmp/model" trainer.save_freq=1 trainer.test_freq=0 data.train_batch_size=4 data.val_size=4
      rollout.n=3 rollout.val_k=0 rollout.max_new_tokens=8 rollout.max_prompt_tokens=2048 rollout.max_steps=2
      rollout.temperature=1.0 trainer.progress=false rollout.env_latency_ms=[100] trainer.output_dir="$tmp/kill")
# Two ranks started by hand (as a cluster scheduler would), each with its own log
# NAME0.log / NAME1.log; pids[0] and pids[1] are theirs.
start_ranks() {  # start_ranks NAME TRAIN_ARGS...
  local name=$1 port r
  shift
  port=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1 \
      "$bin" train "$@" >"$tmp/$name$r.log" 2>&1 &
    pids[$r]=$!
  done
}
# Waits until RUN has logged STEP, sends SIGNAL to rank 1, then waits for rank 0:
# sets rc (rank 0's exit code) and took (seconds after the signal).
signal_rank1_after_step() {  # signal_rank1_after_step RUN STEP SIGNAL
  for _ in $(seq 1 300); do grep -q "\"step\":$2," "$1/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
  kill "-$3" "${pids[1]}"
  local start
  start=$(date +%s.%N)
  wait "${pids[0]}"
  rc=$?
  took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
}
start_ranks kill "${slow[@]}" trainer.total_steps=40 trainer.dist.timeout_s=60
signal_rank1_after_step "$tmp/kill" 3 KILL
echo "     rank 0 exited with $rc, $took s after rank 1 was killed"
check "killed rank: the survivor exits non-zero" test "$rc" -ne 0
check "killed rank: within 15 s (timeout 60 s: a closed connection is seen at once)" \
  python3 -c "import sys; sys.exit(0 if $took < 15 else 1)"
check "killed rank: the message names rank 1" grep -q "rank 1 is not responding" "$tmp/kill0.log"
"$bin" launch --nproc 2 train "${slow[@]}" trainer.total_steps=8 --resume >"$tmp/resume.log" 2>&1
check "killed rank: --resume with 2 ranks finishes" test $? -eq 0
check "killed rank: each step logged once, 1..8" python3 - "$tmp/kill/metrics.jsonl" <<'EOF'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if "timing/gen" in l]
sys.exit(0 if steps == list(range(1, 9)) else (print(steps) or 1))
EOF

# 3. A rank that hangs: stopped, so it never reaches the next collective.
hang=("${slow[@]/%kill/hang}")
start_ranks hang "${hang[@]}" trainer.total_steps=40 trainer.dist.timeout_s=4
signal_rank1_after_step "$tmp/hang" 2 STOP
kill -9 "${pids[1]}" 2>/dev/null
echo "     rank 0 exited with $rc, $took s after rank 1 stopped (timeout 4 s)"
check "hung rank: the survivor fails within timeout + 10 s" python3 -c "import sys; sys.exit(0 if $rc != 0 and $took < 14 else 1)"
check "hung rank: the message names rank 1" grep -q "rank 1 is not responding" "$tmp/hang0.log"
[[ $fail -eq 0 ]] || for f in "$tmp"/*.log; do echo "== $f"; tail -n 5 "$f"; done
exit $fail
