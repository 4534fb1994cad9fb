#!/bin/bash
# Session 8, run 6: the final build (decodeWaves: 4 for the _h1 kernel) timed, and DecodeLayer on the GPU.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
d() { env $2 timeout 60 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log | grep -oE "[0-9.]+ tok/s"); echo "$1,$2,$r" | tee -a $OUT/s8r6.csv; }
d llama-3.1-8b-4bit X=1; d qwen3-30b-a3b-4bit X=1
timeout 40 .gpu/cuda.test -test.count=1 -test.run 'TestConformance$/DecodeLayer' > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "^(--- )?FAIL|panic" $OUT/t.log | head -5
