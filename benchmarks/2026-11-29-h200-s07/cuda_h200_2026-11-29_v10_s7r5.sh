#!/bin/bash
# Session 7, run 5: same-machine A/B of the embedding kernel (mlxcel: a thread per word; mlxcel_old: the
# per-element loop, everything else the same build), and Qwen3 heads fold + one query head per block.
export MLXCEL_CUDA_CACHE=/tmp/kc
TOK="--tokenizer .gpu/tokenizers/llama3_1"
d() { echo "$1 $2 $3 | $(env $3 timeout 90 .gpu/$2 bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK --quiet --csv $OUT/decode.csv 2>&1 | grep -E 'ok|FAIL' | awk '{print $(NF-1)}')"; }
for i in 1 2; do d llama-3.1-8b-4bit mlxcel X=1; d llama-3.1-8b-4bit mlxcel_old X=1; done
d qwen3-30b-a3b-4bit mlxcel X=1; d qwen3-30b-a3b-4bit mlxcel_old X=1; d qwen3-30b-a3b-4bit mlxcel "MLXCEL_CUDA_NORMFUSE=heads MLXCEL_CUDA_DECHEADS=1"
