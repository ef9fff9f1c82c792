#!/usr/bin/env bash
# agentr1 serve end to end on a tiny random model: curl and the official OpenAI node
# client against a server on 127.0.0.1 (a free port), seeded outputs compared with
# `agentr1 generate` (same tokens) and `agentr1 score` (same log-probs), weight reloads
# (/update_weights_from_disk) that change outputs, a refused mismatched checkpoint that
# leaves the old weights serving, every error status, and a clean stop on SIGTERM.
# Log-probs of one request sent twice are compared bit for bit: the server is
# batch-invariant (the default), so a request's numbers do not depend on what it is
# batched with or on whether its prefix was cached (the second send of a prompt is).
# usage: serve_test.sh AGENTR1_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
py=/usr/bin/python3
server_url() {  # server_url LOG: waits (<= 30 s) for the server $pid to print its address
  for _ in $(seq 300); do
    grep -q "listening on" "$1" 2>/dev/null && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  sed -n 's/^agentr1 serve: listening on \(http:[^ ]*\)$/\1/p' "$1" | head -1
}
tok="$src/tests/fixtures/flow/tiny_qwen3"
tiny=(--arch qwen3 --tokenizer "$tok" --intermediate-size 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 8)
"$bin" init-model "${tiny[@]}" --hidden-size 32 --out "$tmp/model" >/dev/null 2>&1
"$bin" init-model "${tiny[@]}" --hidden-size 32 --seed 9 --out "$tmp/other" >/dev/null 2>&1
"$bin" init-model "${tiny[@]}" --hidden-size 48 --out "$tmp/wide" >/dev/null 2>&1
check "tiny models written" test -f "$tmp/model/model.safetensors" -a -f "$tmp/other/model.safetensors" \
  -a -f "$tmp/wide/model.safetensors"

"$bin" serve --model "$tmp/model" --tool-format bogus --port 0 >/dev/null 2>"$tmp/err"
rc=$?
check "serve: unknown --tool-format is a one-line error naming the known ones" \
  test $rc -ne 0 -a "$(wc -l <"$tmp/err")" -eq 1 -a -n "$(grep llama3_json "$tmp/err")"
"$bin" serve --model "$tmp/nowhere" --port 0 >/dev/null 2>"$tmp/err"
rc=$?
check "serve: missing model directory is a one-line error" test $rc -ne 0 -a "$(wc -l <"$tmp/err")" -eq 1

key=k3y
"$bin" serve --model "$tmp/model" --port 0 --threads 1 --max-batch 8 --max-context 1024 --api-key $key \
  >"$tmp/stdout" 2>"$tmp/log" &
pid=$!
url=$(server_url "$tmp/log")
check "serve prints its address" test -n "$url"
check "serve prints it on stdout too" grep -q "^agentr1 serve: listening on $url\$" "$tmp/stdout"
[[ -n $url ]] || { cat "$tmp/log"; exit 1; }
auth=(-H "Authorization: Bearer $key")

post() {  # post PATH BODY -> body on stdout, status in $tmp/status
  curl -s -o "$tmp/body" -w '%{http_code}' "${auth[@]}" -H 'Content-Type: application/json' -d "$2" "$url$1" \
    >"$tmp/status"
  cat "$tmp/body"
}
status_is() { [[ $(cat "$tmp/status") == "$1" ]]; }
# json_ok EXPR: EXPR (Python, over the last body as `b`) is true.
json_ok() { $py -c "import json,sys; b=json.load(open('$tmp/body')); sys.exit(0 if ($1) else 1)"; }
is_error() {  # is_error STATUS [PARAM]: that status and an OpenAI error object
  local param=${2:-}
  status_is "$1" && json_ok "set(b['error']) >= {'message','type','param','code'} and b['error']['message'] \
    and ('$param' == '' or b['error']['param'] == '$param')" || { echo "  got $(cat "$tmp/status"): $(cat "$tmp/body")"; false; }
}

check "health" test "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" = 200
curl -s "${auth[@]}" "$url/v1/models" >"$tmp/body"
check "models: the directory's name and context" json_ok "b['data'][0]['id'] == 'model' and \
  b['data'][0]['max_model_len'] == 1024 and b['data'][0]['owned_by'] == 'agentr1'"

# A seeded sample at temperature 1 equals `agentr1 generate` with that seed (same stops:
# the tokenizer's and config's eos), and its log-probs equal `agentr1 score` on the ids.
post /v1/completions '{"model": "model", "prompt": "hi", "max_tokens": 12, "seed": 3, "return_token_ids": true,
  "logprobs": 0, "skip_special_tokens": false}' >"$tmp/c3.json"
check "completion 200" status_is 200
"$bin" generate --model "$tmp/model" --prompt hi --max-new-tokens 12 --temperature 1 --seed 3 --threads 1 \
  >"$tmp/gen.txt" 2>/dev/null
check "seeded text = agentr1 generate's" $py -c "
import json,sys
c=json.load(open('$tmp/c3.json'))['choices'][0]
g=open('$tmp/gen.txt',encoding='utf-8',errors='surrogateescape').read()
sys.exit(0 if g == c['text'] + '\n' and len(c['token_ids']) > 0 else 1)"
$py -c "import json; c=json.load(open('$tmp/c3.json'))['choices'][0]; print(json.dumps(c['prompt_token_ids'] + c['token_ids']))" \
  >"$tmp/seq.json"
"$bin" score --model "$tmp/model" --threads 1 <"$tmp/seq.json" >"$tmp/score.json"
lp_match() {  # lp_match COMPLETION_JSON SCORE_JSON: server log-probs = score's for the generated ids
  $py -c "
import json,sys
c=json.load(open('$1'))['choices'][0]; s=json.load(open('$2'))
want=s[len(c['prompt_token_ids'])-1:]; got=c['logprobs']['token_logprobs']
d=max(abs(a-b) for a,b in zip(got,want)) if got else 1
print('  max |logprob diff| vs score: %.2e over %d tokens' % (d, len(got)))
sys.exit(0 if len(got) == len(want) == len(c['token_ids']) and d < 1e-4 else 1)"
}
check "log-probs = agentr1 score's" lp_match "$tmp/c3.json" "$tmp/score.json"
post /v1/completions "{\"prompt\": $($py -c "import json; print(json.dumps(json.load(open('$tmp/c3.json'))['choices'][0]['prompt_token_ids']))"),
  \"max_tokens\": 12, \"seed\": 3, \"return_token_ids\": true, \"logprobs\": 0}" >"$tmp/ids3.json"
check "token-id prompt = text prompt (ids and log-probs)" $py -c "
import json,sys
a=json.load(open('$tmp/c3.json'))['choices'][0]; b=json.load(open('$tmp/ids3.json'))['choices'][0]
sys.exit(0 if a['token_ids']==b['token_ids'] and a['logprobs']['token_logprobs']==b['logprobs']['token_logprobs'] else 1)"

# Concurrent requests (continuous batching): 6 at once, each equal to its sequential answer,
# token ids and log-probs bit for bit.
for i in 1 2 3 4 5 6; do
  curl -s "${auth[@]}" -H 'Content-Type: application/json' \
    -d "{\"prompt\": [10, 20, 30], \"max_tokens\": 10, \"seed\": $i, \"return_token_ids\": true, \"logprobs\": 0}" \
    "$url/v1/completions" >"$tmp/par$i.json" &
done
wait $(jobs -p | grep -v "^$pid\$")
for i in 1 2 3 4 5 6; do
  post /v1/completions "{\"prompt\": [10, 20, 30], \"max_tokens\": 10, \"seed\": $i, \"return_token_ids\": true, \"logprobs\": 0}" \
    >"$tmp/seq$i.json"
done
check "6 concurrent requests = sequential ones (ids and log-probs)" $py -c "
import json,sys
c=lambda f: json.load(open(f))['choices'][0]
ok=all(c('$tmp/par%d.json'%i)['token_ids']==c('$tmp/seq%d.json'%i)['token_ids'] and
       c('$tmp/par%d.json'%i)['logprobs']['token_logprobs']==c('$tmp/seq%d.json'%i)['logprobs']['token_logprobs']
       for i in range(1,7))
sys.exit(0 if ok else 1)"

# The official client.
check "openai node client" node "$src/tests/ref/openai_client_check.mjs" "$url" "$key" model

# Errors: status and OpenAI error object.
post /v1/completions '{"prompt": "x", "max_tokens": 2' >/dev/null
check "400 bad JSON" is_error 400
post /v1/completions '{"model": "gpt-4", "prompt": "x"}' >/dev/null
check "400 unknown model" is_error 400 model
post /v1/completions "{\"prompt\": $($py -c "print([5]*1100)")}" >/dev/null
check "400 prompt longer than the context" is_error 400 prompt
post /v1/completions '{"prompt": [1], "top_p": 2}' >/dev/null
check "400 bad sampling value" is_error 400 top_p
post /v1/completions '{"prompt": [99999]}' >/dev/null
check "400 id outside the vocabulary" is_error 400 prompt
post /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}' >/dev/null
check "400 tool_choice required" is_error 400 tool_choice
curl -s -o "$tmp/body" -w '%{http_code}' "${auth[@]}" "$url/v1/completions" >"$tmp/status"
check "405 GET /v1/completions" is_error 405
curl -s -o "$tmp/body" -w '%{http_code}' "${auth[@]}" "$url/v1/embeddings" >"$tmp/status"
check "404 unknown route" is_error 404
curl -s -o "$tmp/body" -w '%{http_code}' "$url/v1/models" >"$tmp/status"
check "401 without the key" is_error 401
curl -s -o "$tmp/body" -w '%{http_code}' -H "Authorization: Bearer nope" -d '{"model_path": "/x"}' \
  "$url/update_weights_from_disk" >"$tmp/status"
check "401 update with a wrong key" is_error 401

# Weight reloads: greedy output before, after loading other weights (version 5), after a
# refused mismatched checkpoint (still the other weights), and back (the original output).
greedy='{"prompt": [3, 1, 4, 1, 5], "max_tokens": 10, "temperature": 0, "return_token_ids": true, "logprobs": 0}'
post /v1/completions "$greedy" >"$tmp/g0.json"
post /update_weights_from_disk "{\"model_path\": \"$tmp/other\", \"policy_version\": 5}" >/dev/null
check "reload: success" json_ok "b['success'] is True"
post /v1/completions "$greedy" >"$tmp/g1.json"
check "reload: outputs change, version 5" $py -c "
import json,sys
a=json.load(open('$tmp/g0.json'))['choices'][0]; b=json.load(open('$tmp/g1.json'))['choices'][0]
sys.exit(0 if a['logprobs']['token_logprobs'] != b['logprobs']['token_logprobs'] and b['policy_version'] == 5 and a['policy_version'] == 0 else 1)"
$py -c "import json; c=json.load(open('$tmp/g1.json'))['choices'][0]; print(json.dumps(c['prompt_token_ids'] + c['token_ids']))" \
  | "$bin" score --model "$tmp/other" --threads 1 >"$tmp/score1.json"
check "reload: log-probs = score of the new checkpoint" lp_match "$tmp/g1.json" "$tmp/score1.json"
post /update_weights_from_disk "{\"model_path\": \"$tmp/wide\", \"policy_version\": 6}" >/dev/null
check "reload: mismatched checkpoint refused (400, names the tensor and shapes)" is_error 400
check "reload: refusal says success false" json_ok "b['success'] is False and 'model.embed_tokens.weight' in b['message'] \
  and '[283, 48]' in b['message'] and '[283, 32]' in b['message']"
post /v1/completions "$greedy" >"$tmp/g2.json"
check "reload: the old weights keep serving" $py -c "
import json,sys
a=json.load(open('$tmp/g1.json'))['choices'][0]; b=json.load(open('$tmp/g2.json'))['choices'][0]
sys.exit(0 if a['token_ids'] == b['token_ids'] and a['logprobs'] == b['logprobs'] and b['policy_version'] == 5 else 1)"
post /update_weights_from_disk "{\"model_path\": \"$tmp/nowhere\"}" >/dev/null
check "reload: missing directory is a 400" is_error 400
post /update_weights_from_disk "{\"model_path\": \"$tmp/model\", \"policy_version\": 7}" >/dev/null
post /v1/completions "$greedy" >"$tmp/g3.json"
check "reload: back to the first weights, first output" $py -c "
import json,sys
a=json.load(open('$tmp/g0.json'))['choices'][0]; b=json.load(open('$tmp/g3.json'))['choices'][0]
sys.exit(0 if a['token_ids'] == b['token_ids'] and a['logprobs'] == b['logprobs'] and b['policy_version'] == 7 else 1)"

check "one log line per request" grep -q "serve: POST /v1/completions 200 .* tokens .* ms" "$tmp/log"
kill -TERM $pid
wait $pid
rc=$?
pid=
check "SIGTERM: clean exit 0" test $rc -eq 0
check "SIGTERM: logged the stop" grep -q "serve: stopped" "$tmp/log"

# LoRA: a server over base + adapter (--lora, unmerged) answers as the merged model and
# as `agentr1 score` on the adapter directory; reloads take adapter directories (another
# step's adapter changes outputs; a plain model is refused and the adapter keeps serving).
"$bin" train model.path="$tmp/model" trainer.output_dir="$tmp/lrun" trainer.total_steps=2 trainer.save_freq=1 \
  data.train_batch_size=2 rollout.n=2 data.val_size=1 rollout.val_k=0 rollout.max_new_tokens=6 \
  actor.lora.rank=4 actor.entropy_coeff=0.5 actor.optim.lr=0.05 trainer.threads=1 trainer.progress=false \
  >/dev/null 2>"$tmp/ltrain.log"
a1=$tmp/lrun/checkpoints/step_000001
a2=$tmp/lrun/checkpoints/step_000002
check "lora: the run wrote PEFT adapters" test -f "$a1/adapter_model.safetensors" -a -f "$a2/adapter_config.json"
"$bin" merge-lora --base "$tmp/model" --adapter "$a1" --out "$tmp/merged1" >/dev/null
check "merge-lora: a plain model" test -f "$tmp/merged1/model.safetensors" -a ! -f "$tmp/merged1/adapter_config.json"
"$bin" serve --model "$tmp/model" --lora "$a1" --port 0 --threads 1 --max-batch 4 --max-context 512 \
  >/dev/null 2>"$tmp/llog" &
pid=$!
url=$(server_url "$tmp/llog")
check "lora: serve --lora listens" test -n "$url"
auth=()
post /v1/completions "$greedy" >"$tmp/l1.json"
ids_of() { $py -c "import json; c=json.load(open('$1'))['choices'][0]; print(json.dumps(c['prompt_token_ids'] + c['token_ids']))"; }
ids_of "$tmp/l1.json" | "$bin" score --model "$a1" --threads 1 >"$tmp/ls1.json"
check "lora: log-probs = score of base + adapter" lp_match "$tmp/l1.json" "$tmp/ls1.json"
ids_of "$tmp/l1.json" | "$bin" score --model "$tmp/merged1" --threads 1 >"$tmp/lm1.json"
check "lora: log-probs = score of the merged model" lp_match "$tmp/l1.json" "$tmp/lm1.json"
post /update_weights_from_disk "{\"model_path\": \"$a2\", \"policy_version\": 2}" >/dev/null
check "lora: adapter reload succeeds" json_ok "b['success'] is True"
post /v1/completions "$greedy" >"$tmp/l2.json"
ids_of "$tmp/l2.json" | "$bin" score --model "$a2" --threads 1 >"$tmp/ls2.json"
check "lora: after the reload, log-probs = score of the new adapter" lp_match "$tmp/l2.json" "$tmp/ls2.json"
check "lora: the new adapter changed the output" $py -c "
import json,sys
a=json.load(open('$tmp/l1.json'))['choices'][0]; b=json.load(open('$tmp/l2.json'))['choices'][0]
sys.exit(0 if a['logprobs']['token_logprobs'] != b['logprobs']['token_logprobs'] and b['policy_version'] == 2 else 1)"
post /update_weights_from_disk "{\"model_path\": \"$tmp/other\"}" >/dev/null
check "lora: a plain model is refused (400)" is_error 400
check "lora: the refusal says adapters only" json_ok "'adapter' in b['message']"
post /v1/completions "$greedy" >"$tmp/l3.json"
check "lora: the adapter keeps serving" $py -c "
import json,sys
a=json.load(open('$tmp/l2.json'))['choices'][0]; b=json.load(open('$tmp/l3.json'))['choices'][0]
sys.exit(0 if a['token_ids'] == b['token_ids'] and a['logprobs'] == b['logprobs'] else 1)"
kill -TERM $pid
wait $pid
pid=
[[ $fail -eq 0 ]] || { echo "--- server log (tail)"; tail -20 "$tmp/log"; tail -20 "$tmp/llog"; }
exit $fail
