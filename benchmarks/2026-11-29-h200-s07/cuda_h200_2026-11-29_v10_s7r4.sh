#!/bin/bash
# Session 7, run 4: embedding a thread per word: suite (Embed widths), models; decode Llama x2;
# Qwen3: folds off against the heads fold alone, and head groups with it.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestModelsGPU|TestGraphReplay' > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "^(--- )?FAIL|panic|^ok|^PASS|normalised error .*>" $OUT/t.log | head -8; grep "Embed/" $OUT/t.log | awk '{print $2, $5}' | tail -3
d() { echo "$1 $2 | $(env $2 timeout 90 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK --quiet --csv $OUT/decode.csv 2>&1 | grep -E 'ok|FAIL' | awk '{print $(NF-1)}')"; }
d llama-3.1-8b-4bit X=1; d llama-3.1-8b-4bit X=1
for i in 1 2; do d qwen3-30b-a3b-4bit X=1; d qwen3-30b-a3b-4bit MLXCEL_CUDA_NORMFUSE=heads; done
d qwen3-30b-a3b-4bit "MLXCEL_CUDA_NORMFUSE=heads MLXCEL_CUDA_DECHEADS=4"; d qwen3-30b-a3b-4bit "MLXCEL_CUDA_NORMFUSE=heads MLXCEL_CUDA_DECHEADS=1"
