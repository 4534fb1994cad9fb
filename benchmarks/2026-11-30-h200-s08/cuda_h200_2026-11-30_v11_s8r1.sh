#!/bin/bash
# Session 8, run 1: time the seventh session's final build; read the idle line; Qwen3 DECWAVES=4.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 200 .gpu/cuda.test -test.count=1 -test.run 'TestConformance$|TestModelsGPU|TestMoEDecode|TestGraphReplay' > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "^(--- )?FAIL|panic" $OUT/t.log | head -5
timeout 150 .gpu/cuda.test -test.count=1 -test.run 'TestConformanceVariants/(mmaxp|folds|decpf)/(Linear|Decode|Attention)' > $OUT/tv.log 2>&1; echo "variants rc=$?"; grep -E "^(--- )?FAIL|panic" $OUT/tv.log | head -5
d() { env $2 timeout 100 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK --csv $OUT/decode.csv > $OUT/d.log 2>&1; grep -E "decode [0-9]+ tokens|idle" $OUT/d.log | sed "s/^/$2 /" | tee -a $OUT/dec.txt; }
for i in 1 2; do d llama-3.1-8b-4bit X=1; d qwen3-30b-a3b-4bit X=1; d qwen3-30b-a3b-4bit MLXCEL_CUDA_DECWAVES=4; done
