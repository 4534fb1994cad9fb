#!/bin/bash
# Session 7, run 2: norm tail (add_rmsnorm in the last block of the o/down product, MLXCEL_CUDA_NORMTAIL):
# suite with the LinearNorm case, models, MoE decode, graph replay; Llama and Qwen3 decode A/B; Qwen3 folds one by one.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestModelsGPU|TestMoEDecode|TestGraphReplay' > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "^(--- )?FAIL|panic|^ok|^PASS|normalised error .*>" $OUT/t.log | head -8; grep -c "LinearNorm.*normalised" $OUT/t.log; grep "LinearNorm" $OUT/t.log | awk '{print $5}' | sort -g | tail -1
d() { echo "$1 $2 | $(env $2 timeout 90 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK --quiet --csv $OUT/decode.csv 2>&1 | grep -E 'ok|FAIL' | awk '{print $(NF-1)}')"; }
for i in 1 2; do d llama-3.1-8b-4bit X=1; d llama-3.1-8b-4bit MLXCEL_CUDA_NORMTAIL=0; done
for i in 1 2; do d qwen3-30b-a3b-4bit X=1; d qwen3-30b-a3b-4bit MLXCEL_CUDA_NORMTAIL=0; d qwen3-30b-a3b-4bit MLXCEL_CUDA_NORMFUSE=heads; done
d qwen3-30b-a3b-4bit MLXCEL_CUDA_NORMFUSE=router; d qwen3-30b-a3b-4bit MLXCEL_CUDA_NORMFUSE=gemv
