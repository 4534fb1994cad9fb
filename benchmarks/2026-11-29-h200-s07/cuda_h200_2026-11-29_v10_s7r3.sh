#!/bin/bash
# Session 7, run 3: argmax over several blocks (argmax_split): suite, models, MoE decode, graph replay;
# decode A/B against MLXCEL_CUDA_ARGMAX=rows; Qwen3 in-graph kernel costs (MLXCEL_CUDA_SKIP, results wrong).
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestModelsGPU|TestMoEDecode|TestGraphReplay' > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "^(--- )?FAIL|panic|^ok|^PASS|normalised error .*>|Argmax" $OUT/t.log | head -8
d() { echo "$1 $2 | $(env $2 timeout 90 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK --quiet --csv $OUT/decode.csv 2>&1 | grep -E 'ok|FAIL' | awk '{print $(NF-1)}')"; }
for i in 1 2; do d llama-3.1-8b-4bit X=1; d llama-3.1-8b-4bit MLXCEL_CUDA_ARGMAX=rows; done
d qwen3-30b-a3b-4bit X=1; d qwen3-30b-a3b-4bit MLXCEL_CUDA_ARGMAX=rows
for k in attn_decode_128 rmsnorm add_rmsnorm qgemvm4_bf_g64 moe_gateup4_bf_g64 moe_down_sum4_bf_g32; do d qwen3-30b-a3b-4bit MLXCEL_CUDA_SKIP=$k; done
