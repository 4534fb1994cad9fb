#!/bin/bash
# Session 8, run 2: pipelined greedy decode (steps queued ahead, FeedTokens) against the previous build.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestModelsGPU|TestConformance$/Embed|TestGraphReplay|TestMoEDecode' > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "^(--- )?FAIL|panic|pipelined" $OUT/t.log | head -20
d() { env $3 timeout 100 .gpu/$2 bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK --csv $OUT/decode_$2.csv > $OUT/d.log 2>&1; grep -E "decode [0-9]+ tokens" $OUT/d.log | sed "s/^/$2 $3 /" | tee -a $OUT/dec.txt; }
for i in 1 2; do for m in llama-3.1-8b-4bit qwen3-30b-a3b-4bit; do d $m mlxcel_old X=1; d $m mlxcel X=1; done; done
