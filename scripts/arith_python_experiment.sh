#!/usr/bin/env bash
# Arithmetic with the python tool (issue 36's run): a built-in model trained from scratch
# on python demonstrations, then GRPO on held-out-validated problems.
#
#   bash scripts/arith_python_experiment.sh [AGENTR1] [OUT] [STEPS]
#
# 1. SFT, two stages of 9,600 level-1 demonstrations each (600 steps of 16 at lr 3e-3;
#    the second stage starts from the first and sees new problems, seed 12): a fresh
#    2,304-token BPE and a ~1.1M-parameter Qwen3-architecture model, the recipe of the
#    built-in calculator model with the python tool (`{"code": "print(<expression>)"}`
#    run in the sandbox). Built once; a model directory whose recipe.json matches is
#    reused.
# 2. GRPO with configs/builtin.yaml's settings (8 prompts x 16 samples, T 0.7, lr 3e-4)
#    for STEPS steps (default 100), validated every 25 on 128 held-out problems.
# Seeds are the recipes' (data and init seed 11 and 12, trainer seed default).
set -euo pipefail
AGENTR1=${1:-./build/agentr1}
OUT=${2:-runs/arith_python_grpo}
STEPS=${3:-100}

demos='"tasks":{"arithmetic":{"demos":9600,"kwargs":{"tool":"python"}}}'
recipe='"vocab_size":2304,"corpus_problems":2000,"sft_lr":0.003,"sft_epochs":1'
stage1="{\"dir\":\"runs/_builtin/model_python\",$recipe,$demos}"
options="{\"dir\":\"runs/_builtin/model_python2\",$recipe,\"seed\":12,$demos,\"init_from\":$stage1}"
"$AGENTR1" sft --options "$options"

"$AGENTR1" train --config configs/builtin.yaml model.path=runs/_builtin/model_python2 \
  ++data.task=arithmetic ++data.task_kwargs.tool=python ++data.task_kwargs.tools_in_prompt=false \
  trainer.output_dir="$OUT" trainer.total_steps="$STEPS" trainer.test_freq=25 --overwrite
