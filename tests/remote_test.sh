#!/usr/bin/env bash
# rollout.engine=remote end to end, on 127.0.0.1 with a tiny model:
#  1. `agentr1 serve --port 0` serves the model; a 2-step GRPO run rolls out on it
#     (rollout.engine=remote) while the learner trains in-process, and the same run with
#     the in-process engine (same seeds) must give the same trajectories, token for token,
#     with the same policy versions, in both steps (step 2 rolls out on the weights the
#     server reloaded after step 1: written as fp32 safetensors, so the same bits), and
#     the same validation, and the same behaviour log-probs bit for bit. Both engines are
#     batch-invariant (the default): a request's numbers do not depend on what it is
#     batched with, on which prefixes either side's cache holds (that depends on request
#     timing) or on how its prompt was chunked, so nothing is pinned to one sequence at a
#     time: the server batches (--max-batch 16) and the client keeps requests in flight.
#  2. The server loaded the initial weights and each update (policy versions 0, 1, 2),
#     only the latest weights directory is kept, and the remote/* metrics are logged;
#     --resume loads the checkpoint's weights into the server (step 3 equal again); two
#     servers share the groups and give the same trajectories.
#  3. Asynchronous rollout on the server (the producer generates through it; pushed
#     versions are written by the learner and loaded by the producer): at max_staleness 0
#     (rollout.async=true) the in-process synchronous run again, token for token. At
#     max_staleness 1 which version generates which group depends on timing (how far the
#     producer got before each reload), so the runs are not comparable as a whole; what
#     must hold (3 steps): every step's versions within [s - 2, s - 1], step 1 on version
#     0, and a trajectory (same uid: step seed, sample, repeat) that both this run and an
#     in-process max_staleness=1 run sampled on the same versions has the same token ids
#     when those versions' weights are the same in both: version 0 always, version v when
#     both runs trained steps 1..v on the same trajectories (uids and versions).
#  4. Data parallelism: 2 ranks (`agentr1 launch`), each generating its share on the
#     server, give the in-process 1-process run's trajectories and validation; rank 0
#     alone hands the weights over (versions 0, 1, 2 loaded once each).
#  5. An unreachable server fails at start naming its URL; with 2 ranks, rank 0's failure
#     to hand the weights over fails rank 1 too, naming it.
# usage: remote_test.sh AGENTR1_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}

"$bin" init-model --arch qwen3 --tokenizer "$src/tests/fixtures/flow/tiny_qwen3" --hidden-size 32 \
  --intermediate-size 64 --layers 2 --heads 4 --kv-heads 2 --seed 5 --out "$tmp/model" >/dev/null || exit 1

start_server() {  # start_server NAME : agentr1 serve on a free port; sets $port
  "$bin" serve --model "$tmp/model" --port 0 --threads 1 >"$tmp/$1.out" 2>"$tmp/$1.err" &
  local pid=$!
  pids+=($pid)
  port=""
  for _ in $(seq 300); do
    port=$(sed -n 's|^agentr1 serve: listening on http://127\.0\.0\.1:\([0-9][0-9]*\)$|\1|p' "$tmp/$1.out")
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z $port ]]; then
    echo "FAIL agentr1 serve did not start:"
    cat "$tmp/$1.err"
    exit 1
  fi
  echo "     agentr1 serve ($1) on port $port"
}
start_server serve

common=(model.path="$tmp/model" trainer.total_steps=2 trainer.test_freq=0 data.train_batch_size=2 rollout.n=3
        data.val_size=3 rollout.val_k=2 rollout.max_new_tokens=32 "rollout.stop_strings=[er]" rollout.max_steps=2
        rollout.temperature=0.7
        actor.optim.lr=0.05 trainer.threads=1 trainer.progress=false trainer.dump_trajectories=-1)
t0=$(date +%s)
"$bin" train "${common[@]}" trainer.output_dir="$tmp/local" >"$tmp/local.log" 2>&1
check "in-process run" test $? -eq 0
"$bin" train "${common[@]}" trainer.output_dir="$tmp/remote" rollout.engine=remote \
  "rollout.remote.urls=[http://127.0.0.1:$port]" >"$tmp/remote.log" 2>&1
check "remote run" test $? -eq 0 || tail -5 "$tmp/remote.log"
echo "     two runs in $(( $(date +%s) - t0 )) s"

same_as_local() {  # same_as_local RUN_DIR [LATER_TOL] : trajectories and validation equal the in-process run's;
                  # log-probs bit for bit, after step 1 within LATER_TOL when given (see the 2-rank run)
python3 - "$tmp/local" "$1" "${2:-0}" <<'EOF'
import collections, glob, json, os, sys
one, two, later_tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
def trajs(d):  # (file, uid) -> [(prompt ids, response ids, policy version, log-probs)] per step
    out = {}
    for f in sorted(glob.glob(d + "/trajectories/*.jsonl")):
        for line in open(f):
            j = json.loads(line)
            out[(os.path.basename(f), j["uid"])] = [
                (s["prompt_ids"], s["response_ids"], s["policy_version"], s["response_logprobs"]) for s in j["steps"]]
    return out
a, b = trajs(one), trajs(two)
ids = lambda t: [s[:3] for s in t]
files = sorted({k[0] for k in a})
same = [f for f in files if all(ids(a[k]) == ids(b.get(k, [])) for k in a if k[0] == f)]
print("     %d trajectories in %s; token ids and versions identical in %s" % (len(a), ", ".join(files),
                                                                           ", ".join(same) or "none"))
for k in sorted(a):
    if ids(a[k]) != ids(b.get(k, [])):
        for i, (s, t) in enumerate(zip(a[k], b.get(k, []))):
            if s[:3] != t[:3]:
                print("     first difference: %s %s step %d\n       %s\n    vs %s" % (k[0], k[1], i, s[:3], t[:3]))
                break
        break
# Log-probs: the same bits (both engines are batch-invariant); with later_tol, the steps
# after the first (sampled by weights the learner updated) within it.
def diffs(keys):
    return [abs(u - v) for k in keys if k in b and ids(a[k]) == ids(b[k])
            for s, t in zip(a[k], b[k]) for u, v in zip(s[3], t[3])]
first = [k for k in a if k[0] == "step_000001.jsonl"]
later = [k for k in a if k[0] != "step_000001.jsonl"]
d1, d2 = diffs(first), diffs(later)
equal = sum(1 for k in a if a[k] == b.get(k))
print("     log-probs: %d of %d trajectories bit-identical; max |diff| %.3g in step 1 (%d tokens), %.3g after" % (
    equal, len(a), max(d1, default=0.0), len(d1), max(d2, default=0.0)))
versions = sorted({s[2] for v in b.values() for s in v})
print("     policy versions in the remote dumps: %s" % versions)
finish = collections.Counter(s["info"]["finish_reason"] for f in glob.glob(two + "/trajectories/*.jsonl")
                             for l in open(f) for s in json.loads(l)["steps"])
print("     turns by finish reason: %s" % dict(finish))
ok = (len(a) > 0 and sorted(a) == sorted(b) and len(same) == len(files) and len(files) >= 2 and
      versions == [0, 1, 2] and len(d1) > 0 and max(d1) == 0.0 and max(d2, default=0.0) <= later_tol and
      (later_tol > 0 or equal == len(a)))
sa, sb = json.load(open(one + "/summary.json")), json.load(open(two + "/summary.json"))
def val(s, k):  # every validation metric but its wall time
    return {m: v for m, v in s[k].items() if m != "wall_s"}
same_val = len(val(sa, "final")) > 3 and all(val(sa, k) == val(sb, k) for k in ("baseline", "final"))
print("     validation metrics (baseline and final, %d each) %s" % (len(val(sa, "final")),
                                                                  "identical" if same_val else "DIFFER"))
sys.exit(0 if ok and same_val else 1)
EOF
}
same_as_local "$tmp/remote"
check "remote trajectories equal in-process ones (ids, versions, log-probs bit for bit; steps 1, 2)" test $? -eq 0

python3 - "$tmp/remote" <<'EOF'
import json, sys
m = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
m = [x for x in m if "timing/gen" in x]
ok = len(m) == 2 and all(x["remote/requests"] > 0 and x["remote/retries"] == 0 and x["remote/unknown_logprobs"] == 0
                          and x["rollout/logprob_max_diff"] < 1e-4 for x in m)
print("     remote/requests %s, rollout/logprob_max_diff %s" % ([x.get("remote/requests") for x in m],
                                                                 [x.get("rollout/logprob_max_diff") for x in m]))
sys.exit(0 if ok else 1)
EOF
check "remote metrics logged; server and learner log-probs agree" test $? -eq 0

check "only the latest weights are kept" test "$(ls "$tmp/remote/remote_weights")" = "policy_v000002"
check "the weights directory is an HF model" test -f "$tmp/remote/remote_weights/policy_v000002/model.safetensors" \
  -a -f "$tmp/remote/remote_weights/policy_v000002/config.json" \
  -a -f "$tmp/remote/remote_weights/policy_v000002/tokenizer.json"
check "the server reloaded 3 times (versions 0, 1, 2)" \
  test "$(grep -c 'update_weights_from_disk' "$tmp/serve.err")" -ge 3

# --resume pushes the checkpoint's weights (version 2) before step 3: still the in-process run's.
# The server is put back on the initial weights first, so only the resume's push gives it version 2.
curl -s -X POST "http://127.0.0.1:$port/update_weights_from_disk" -H 'Content-Type: application/json' \
  -d "{\"model_path\": \"$tmp/model\", \"policy_version\": 0}" >/dev/null
cp -r "$tmp/local" "$tmp/local3"
cp -r "$tmp/remote" "$tmp/remote3"
"$bin" train "${common[@]}" trainer.total_steps=3 trainer.output_dir="$tmp/local3" --resume >"$tmp/local3.log" 2>&1
"$bin" train "${common[@]}" trainer.total_steps=3 trainer.output_dir="$tmp/remote3" rollout.engine=remote \
  "rollout.remote.urls=[http://127.0.0.1:$port]" --resume >"$tmp/remote3.log" 2>&1
check "resumed remote run" test $? -eq 0
check "resumed: step 3 equals the in-process run's" python3 -c "
import json, sys
def t(d): return [[(s['prompt_ids'], s['response_ids'], s['policy_version'], s['response_logprobs'])
                   for s in json.loads(l)['steps']] for l in open(d + '/trajectories/step_000003.jsonl')]
a, b = t('$tmp/local3'), t('$tmp/remote3')
same_ids = [[s[:3] for s in x] for x in a] == [[s[:3] for s in x] for x in b]
diff = max((abs(u - v) for x, y in zip(a, b) for s, r in zip(x, y) for u, v in zip(s[3], r[3])), default=0.0)
sys.exit(0 if a and same_ids and diff == 0.0 and {s[2] for x in b for s in x} == {2} else 1)"

# Two servers: groups are spread over both (each keeps its own prefix cache), results unchanged.
first=$port
start_server serve2
"$bin" train "${common[@]}" trainer.output_dir="$tmp/two" rollout.engine=remote \
  "rollout.remote.urls=[http://127.0.0.1:$first, http://127.0.0.1:$port]" \
  >"$tmp/two.log" 2>&1
check "two-server run" test $? -eq 0 || tail -5 "$tmp/two.log"
same_as_local "$tmp/two"
check "two servers give the in-process trajectories too" test $? -eq 0
python3 - "$tmp/two" <<'EOF'
import json, sys
m = [x for x in map(json.loads, open(sys.argv[1] + "/metrics.jsonl")) if "timing/gen" in x]
share = [x["remote/server_share_max"] for x in m]
print("     busiest server's share of the requests per step: %s" % share)
sys.exit(0 if share and all(s < 1.0 for s in share) else 1)
EOF
check "two servers: both served requests" test $? -eq 0

# 3. Asynchronous rollout on the server. Staleness 0: the synchronous trajectories.
loads_before=$(grep -c 'update_weights_from_disk' "$tmp/serve.err")
t0=$(date +%s)
"$bin" train "${common[@]}" trainer.output_dir="$tmp/async0" rollout.engine=remote rollout.async=true \
  "rollout.remote.urls=[http://127.0.0.1:$first]" >"$tmp/async0.log" 2>&1
check "remote asynchronous run (max_staleness 0)" test $? -eq 0 || tail -5 "$tmp/async0.log"
echo "     in $(( $(date +%s) - t0 )) s"
same_as_local "$tmp/async0"
check "remote async at staleness 0 = in-process synchronous (ids, versions, validation)" test $? -eq 0
check "remote async: the server loaded versions 0, 1, 2" \
  test "$(( $(grep -c 'update_weights_from_disk' "$tmp/serve.err") - loads_before ))" -eq 3
check "remote async: only the latest weights are kept" test "$(ls "$tmp/async0/remote_weights")" = "policy_v000002"

# Staleness 1: in-process and remote, then the comparison described at the top.
t0=$(date +%s)
"$bin" train "${common[@]}" trainer.total_steps=3 trainer.output_dir="$tmp/local-async1" rollout.max_staleness=1 \
  >"$tmp/local-async1.log" 2>&1
check "in-process run, max_staleness 1" test $? -eq 0 || tail -5 "$tmp/local-async1.log"
"$bin" train "${common[@]}" trainer.total_steps=3 trainer.output_dir="$tmp/async1" rollout.engine=remote \
  rollout.max_staleness=1 \
  "rollout.remote.urls=[http://127.0.0.1:$first]" >"$tmp/async1.log" 2>&1
check "remote run, max_staleness 1" test $? -eq 0 || tail -5 "$tmp/async1.log"
echo "     two runs in $(( $(date +%s) - t0 )) s"
python3 - "$tmp/local-async1" "$tmp/async1" <<'EOF'
import glob, json, os, sys
one, two = sys.argv[1], sys.argv[2]
def trajs(d):  # uid -> (trained in step, [(prompt ids, response ids, policy version)] per step)
    out = {}
    for f in sorted(glob.glob(d + "/trajectories/step_*.jsonl")):
        step = int(os.path.basename(f)[5:11])
        for line in open(f):
            j = json.loads(line)
            out[j["uid"]] = (step, [(s["prompt_ids"], s["response_ids"], s["policy_version"]) for s in j["steps"]])
    return out
a, b = trajs(one), trajs(two)
ok = len(b) == 18 and {s for s, _ in b.values()} == {1, 2, 3}
for uid, (step, steps) in b.items():
    for s in steps:
        if not step - 2 <= s[2] <= step - 1 or (step == 1 and s[2] != 0):
            print("     %s trained in step %d was sampled by version %d" % (uid, step, s[2]))
            ok = False
# Version v is the same weights in both runs when both trained steps 1..v on the same
# trajectories (uids and the versions that sampled them).
trained = lambda t, step: sorted((u, tuple(s[2] for s in x)) for u, (st, x) in t.items() if st == step)
same_upto = 0
while same_upto < 3 and trained(a, same_upto + 1) == trained(b, same_upto + 1):
    same_upto += 1
comparable = [u for u in b if u in a and [s[2] for s in a[u][1]] == [s[2] for s in b[u][1]]
              and max(s[2] for s in b[u][1]) <= same_upto]
equal = [u for u in comparable if a[u][1] == b[u][1]]
versions = sorted({s[2] for _, t in b.values() for s in t})
print("     remote: %d trajectories, versions %s; versions 0..%d the same weights in both runs; %d trajectories "
      "comparable with the in-process run, %d with equal token ids" % (len(b), versions, same_upto, len(comparable),
                                                                       len(equal)))
ok = ok and len(comparable) >= 6 and len(equal) == len(comparable)
m = [x for x in map(json.loads, open(two + "/metrics.jsonl")) if "timing/gen" in x]
ok = ok and len(m) == 3 and all(x["async/staleness_max"] <= 1 and "remote/requests" in x for x in m)
print("     learner's push (timing/weight_write) %s s; producer's reloads (timing/weight_swap) %s s" % (
    [round(x["timing/weight_write"], 4) for x in m], [round(x["timing/weight_swap"], 4) for x in m]))
sys.exit(0 if ok else 1)
EOF
check "remote async at staleness 1: within the bound; comparable trajectories equal the in-process ones" \
  test $? -eq 0

# 4. Two data-parallel ranks on the server.
loads_before=$(grep -c 'update_weights_from_disk' "$tmp/serve.err")
t0=$(date +%s)
"$bin" launch --nproc 2 train "${common[@]}" trainer.output_dir="$tmp/dp" rollout.engine=remote \
  "rollout.remote.urls=[http://127.0.0.1:$first]" >"$tmp/dp.log" 2>&1
check "2-rank remote run" test $? -eq 0 || tail -5 "$tmp/dp.log"
echo "     in $(( $(date +%s) - t0 )) s"
# 2 ranks sum their gradients in another order than 1 process: the weights after step 1
# differ in the last bits (dp_test.sh), so step 2's log-probs are held to 1e-5.
same_as_local "$tmp/dp" 1e-5
check "2 ranks on the server = in-process 1-process run (ids, versions, validation)" test $? -eq 0
check "2 ranks: rank 0 alone pushed (versions 0, 1, 2 loaded once each)" \
  test "$(( $(grep -c 'update_weights_from_disk' "$tmp/serve.err") - loads_before ))" -eq 3
check "2 ranks: both ranks generated" python3 -c "
import json, sys
m = [x for x in map(json.loads, open('$tmp/dp/metrics.jsonl')) if 'timing/gen' in x]
print('     remote/requests (summed over ranks) %s, dist/world_size %s' % ([x['remote/requests'] for x in m],
      [x.get('dist/world_size') for x in m]))
sys.exit(0 if len(m) == 2 and all(x.get('dist/world_size') == 2 for x in m) else 1)"

# 5. Start-up errors: one line naming the problem.
"$bin" train "${common[@]}" trainer.output_dir="$tmp/dead" rollout.engine=remote \
  "rollout.remote.urls=[http://127.0.0.1:1]" rollout.remote.retries=1 rollout.remote.backoff_s=0.01 \
  >/dev/null 2>"$tmp/err"
check "unreachable server: non-zero exit" test $? -ne 0
check "unreachable server: names the URL and the attempts" \
  grep -q "http://127.0.0.1:1: GET /v1/models failed after 2 attempts" "$tmp/err"
check "unreachable server: no run directory left" test ! -e "$tmp/dead"
"$bin" train "${common[@]}" trainer.output_dir="$tmp/nourl" rollout.engine=remote >/dev/null 2>"$tmp/err"
check "remote without urls names the key" grep -q "rollout.remote.urls must list at least one server" "$tmp/err"
# 2 ranks, and rank 0 cannot write the weights: every rank fails, naming the cause.
touch "$tmp/plainfile"
"$bin" launch --nproc 2 train "${common[@]}" trainer.output_dir="$tmp/dpbad" rollout.engine=remote \
  "rollout.remote.urls=[http://127.0.0.1:$first]" rollout.remote.weights_dir="$tmp/plainfile/w" >"$tmp/dpbad.log" 2>&1
check "2 ranks, unwritable weights_dir: non-zero exit" test $? -ne 0
check "2 ranks, unwritable weights_dir: rank 1 names rank 0's failure and the key" \
  grep -q "rank 1): error: rank 0 failed to hand policy version 0 to the remote engines: .*rollout.remote.weights_dir" \
  "$tmp/dpbad.log"

kill "${pids[@]}" 2>/dev/null
wait 2>/dev/null
exit $fail
