#!/usr/bin/env bash
# SGLang's native API on `agentr1 serve`, end to end on 127.0.0.1 with a tiny model:
#  1. POST /generate answers SGLang's output dicts (text, output_ids, meta_info with
#     finish_reason, prompt/completion token counts, output_token_logprobs triples); with
#     the same seed it generates what /v1/completions generates (the two endpoints are
#     two wire formats over one engine); a batch with n = 2 answers a prompt-major list;
#     stream: true sends cumulative SSE chunks whose last one is the non-streamed answer,
#     then [DONE]; a bad value is a 400 {"error": {"message"}} naming the field.
#  2. rollout.engine=remote rollout.remote.api=sglang (RemoteGenerator on /generate) gives
#     the same 2-step GRPO trajectories as the in-process engine, token for token, with the
#     same policy versions (step 2 rolls out on the weights the server reloaded after step
#     1), the same validation and the same log-probs bit for bit: both engines are
#     batch-invariant (the default), so batching, either side's prefix cache and request
#     timing change nothing (remote_test.sh says more).
# usage: sglang_test.sh AGENTR1_BINARY SOURCE_DIR
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

"$bin" serve --model "$tmp/model" --port 0 --threads 1 >"$tmp/serve.out" 2>"$tmp/serve.err" &
pids+=($!)
port=""
for _ in $(seq 300); do
  port=$(sed -n 's|^agentr1 serve: listening on http://127\.0\.0\.1:\([0-9][0-9]*\)$|\1|p' "$tmp/serve.out")
  [[ -n $port ]] && break
  kill -0 "${pids[0]}" 2>/dev/null || break
  sleep 0.1
done
if [[ -z $port ]]; then
  echo "FAIL agentr1 serve did not start:"
  cat "$tmp/serve.err"
  exit 1
fi
url="http://127.0.0.1:$port"
echo "     agentr1 serve on port $port"

# 1. The wire format over HTTP.
post() {  # post PATH BODY OUT : writes the body to OUT, prints the HTTP status
  curl -s -o "$3" -w '%{http_code}' -X POST "$url$1" -H 'Content-Type: application/json' -d "$2"
}
check "/generate, text prompt: 200" test "$(post /generate \
  '{"text": "Hello there", "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": true},
    "return_logprob": true}' "$tmp/g1.json")" = 200
check "/generate, text prompt: SGLang's output dict" python3 - "$tmp/g1.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
m = r["meta_info"]
ok = (isinstance(r["text"], str) and len(r["output_ids"]) == 6 and m["completion_tokens"] == 6
      and m["finish_reason"] == {"type": "length", "length": 6} and m["prompt_tokens"] > 0
      and isinstance(m["id"], str) and m["weight_version"] == "0"
      and [t[1] for t in m["output_token_logprobs"]] == r["output_ids"]
      and all(t[2] is None and t[0] <= 0 for t in m["output_token_logprobs"]) and m["input_token_logprobs"] == [])
print("     text %r, finish_reason %s, %d log-prob triples" % (r["text"], m["finish_reason"],
                                                             len(m["output_token_logprobs"])))
sys.exit(0 if ok else 1)
EOF

# Same prompt ids, seed and options on both endpoints: the same tokens and log-probs.
ids='[9, 30, 31, 32, 33]'
post /generate "{\"input_ids\": $ids, \"return_logprob\": true, \"sampling_params\": {\"max_new_tokens\": 12,
  \"temperature\": 0.8, \"top_k\": 20, \"sampling_seed\": 4242, \"ignore_eos\": true}}" "$tmp/g2.json" >/dev/null
post /v1/completions "{\"prompt\": $ids, \"max_tokens\": 12, \"temperature\": 0.8, \"top_k\": 20, \"seed\": 4242,
  \"ignore_eos\": true, \"logprobs\": 1, \"return_token_ids\": true}" "$tmp/c2.json" >/dev/null
check "/generate = /v1/completions for one seed (token ids and log-probs)" python3 - "$tmp/g2.json" "$tmp/c2.json" <<'EOF'
import json, sys
g, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["choices"][0]
same = g["output_ids"] == c["token_ids"] and [t[0] for t in g["meta_info"]["output_token_logprobs"]] == \
    c["logprobs"]["token_logprobs"] and g["text"] == c["text"]
print("     %d tokens: %s" % (len(g["output_ids"]), "identical" if same else "DIFFER: %s vs %s" % (g, c)))
sys.exit(0 if same else 1)
EOF

# A negative seed is the same 64 bits as its unsigned twin (RemoteGenerator sends signed seeds).
post /generate "{\"input_ids\": $ids, \"sampling_params\": {\"max_new_tokens\": 8, \"sampling_seed\": -3}}" \
  "$tmp/s1.json" >/dev/null
post /generate "{\"input_ids\": $ids, \"sampling_params\": {\"max_new_tokens\": 8,
  \"sampling_seed\": 18446744073709551613}}" "$tmp/s2.json" >/dev/null
check "sampling_seed -3 = 18446744073709551613" python3 -c "
import json, sys
a, b = (json.load(open('$tmp/s%d.json' % i)) for i in (1, 2))
sys.exit(0 if a['output_ids'] == b['output_ids'] and len(a['output_ids']) > 0 else 1)"

post /generate '{"input_ids": [[9, 30], [31, 32, 33]], "sampling_params": {"max_new_tokens": 3, "n": 2,
  "sampling_seed": 7}}' "$tmp/b.json" >/dev/null
post /generate '{"input_ids": [31, 32, 33], "sampling_params": {"max_new_tokens": 3, "sampling_seed": 8}}' \
  "$tmp/b1.json" >/dev/null
check "/generate batch with n = 2: 4 dicts, prompt-major, sample j seeded seed + j" python3 - "$tmp/b.json" \
  "$tmp/b1.json" <<'EOF'
import json, sys
b, one = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ok = (isinstance(b, list) and len(b) == 4 and [x["meta_info"]["prompt_tokens"] for x in b] == [2, 2, 3, 3]
      and b[3]["output_ids"] == one["output_ids"] and len({x["meta_info"]["id"] for x in b}) == 4)
print("     prompt_tokens %s; prompt 1 sample 1 (seed 8) %s the single request with seed 8" % (
    [x["meta_info"]["prompt_tokens"] for x in b], "equals" if b[3]["output_ids"] == one["output_ids"] else "DIFFERS from"))
sys.exit(0 if ok else 1)
EOF

curl -s -N -X POST "$url/generate" -H 'Content-Type: application/json' -d "{\"input_ids\": $ids, \"stream\": true,
  \"return_logprob\": true, \"sampling_params\": {\"max_new_tokens\": 12, \"temperature\": 0.8, \"top_k\": 20,
  \"sampling_seed\": 4242, \"ignore_eos\": true}}" >"$tmp/stream.txt"
check "/generate stream: cumulative chunks, the last = the non-streamed answer, then [DONE]" python3 - \
  "$tmp/stream.txt" "$tmp/g2.json" <<'EOF'
import json, sys
events = [l[len("data: "):] for l in open(sys.argv[1]).read().split("\n\n") if l.startswith("data: ")]
whole = json.load(open(sys.argv[2]))
chunks = [json.loads(e) for e in events[:-1]]
last = dict(chunks[-1])
ok = (events[-1] == "[DONE]" and len(chunks) == 12
      and all(c["output_ids"] == whole["output_ids"][:k + 1] for k, c in enumerate(chunks))
      and all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1]))
for d in (last, whole):
    d["meta_info"] = {k: v for k, v in d["meta_info"].items() if k != "id"}
ok = ok and last == whole
print("     %d chunks, the last %s" % (len(chunks), "equals the response" if last == whole else "DIFFERS"))
sys.exit(0 if ok else 1)
EOF

check "/generate bad value: 400 naming the field" test "$(post /generate \
  '{"input_ids": [1], "sampling_params": {"top_k": 0}}' "$tmp/e.json")" = 400
check "/generate bad value: SGLang's error body" python3 -c "
import json, sys
e = json.load(open('$tmp/e.json'))['error']
print('     ' + e['message'])
sys.exit(0 if 'sampling_params.top_k' in e['message'] and e['param'] == 'sampling_params.top_k' else 1)"
check "/health answers 200" test "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" = 200

# 2. Training with rollout.remote.api=sglang = the in-process engine.
common=(model.path="$tmp/model" trainer.total_steps=2 trainer.test_freq=0 data.train_batch_size=2 rollout.n=3
        data.val_size=3 rollout.val_k=2 rollout.max_new_tokens=32 "rollout.stop_strings=[er]" rollout.max_steps=2
        rollout.temperature=0.7
        actor.optim.lr=0.05 trainer.threads=1 trainer.progress=false trainer.dump_trajectories=-1)
t0=$(date +%s)
"$bin" train "${common[@]}" trainer.output_dir="$tmp/local" >"$tmp/local.log" 2>&1
check "in-process run" test $? -eq 0
"$bin" train "${common[@]}" trainer.output_dir="$tmp/remote" rollout.engine=remote rollout.remote.api=sglang \
  "rollout.remote.urls=[$url]" >"$tmp/remote.log" 2>&1
check "remote run (api=sglang)" test $? -eq 0 || tail -5 "$tmp/remote.log"
echo "     two runs in $(( $(date +%s) - t0 )) s"

python3 - "$tmp/local" "$tmp/remote" <<'EOF'
import collections, glob, json, os, sys
one, two = sys.argv[1], sys.argv[2]
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
                print("     first difference: %s %s step %d (prompts %s), response ids and version:\n       %s\n    vs %s"
                      % (k[0], k[1], i, "equal" if s[0] == t[0] else "differ", s[1:3], t[1:3]))
                break
        break
diffs = [abs(u - v) for k in a if k in b and ids(a[k]) == ids(b[k])
         for s, t in zip(a[k], b[k]) for u, v in zip(s[3], t[3])]
equal = sum(1 for k in a if a[k] == b.get(k))
print("     log-probs: %d of %d trajectories bit-identical, max |diff| %.3g over %d tokens" % (
    equal, len(a), max(diffs, default=0.0), len(diffs)))
versions = sorted({s[2] for v in b.values() for s in v})
finish = collections.Counter(s["info"]["finish_reason"] for f in glob.glob(two + "/trajectories/*.jsonl")
                             for l in open(f) for s in json.loads(l)["steps"])
print("     policy versions in the remote dumps: %s; turns by finish reason: %s" % (versions, dict(finish)))
ok = (len(a) > 0 and sorted(a) == sorted(b) and len(same) == len(files) and len(files) >= 2 and
      versions == [0, 1, 2] and max(diffs, default=0.0) == 0.0 and equal == len(a) and len(finish) >= 2)
sa, sb = json.load(open(one + "/summary.json")), json.load(open(two + "/summary.json"))
def val(s, k):  # every validation metric but its wall time
    return {m: v for m, v in s[k].items() if m != "wall_s"}
same_val = len(val(sa, "final")) > 3 and all(val(sa, k) == val(sb, k) for k in ("baseline", "final"))
print("     validation metrics (baseline and final, %d each) %s" % (len(val(sa, "final")),
                                                                  "identical" if same_val else "DIFFER"))
sys.exit(0 if ok and same_val else 1)
EOF
check "api=sglang trajectories equal in-process ones (ids, versions, log-probs bit for bit; steps 1, 2)" test $? -eq 0
check "the server answered /generate (not /v1/completions) for the remote run" \
  test "$(grep -c 'POST /generate 200' "$tmp/serve.err")" -gt 20
python3 - "$tmp/remote" <<'EOF'
import json, sys
m = [x for x in map(json.loads, open(sys.argv[1] + "/metrics.jsonl")) if "timing/gen" in x]
ok = len(m) == 2 and all(x["remote/requests"] > 0 and x["remote/retries"] == 0 and x["remote/unknown_logprobs"] == 0
                          and x["rollout/logprob_max_diff"] < 1e-4 for x in m)
print("     remote/requests %s, rollout/logprob_max_diff %s" % ([x.get("remote/requests") for x in m],
                                                                 [x.get("rollout/logprob_max_diff") for x in m]))
sys.exit(0 if ok else 1)
EOF
check "remote metrics logged; server and learner log-probs agree" test $? -eq 0

kill "${pids[@]}" 2>/dev/null
wait 2>/dev/null
exit $fail
