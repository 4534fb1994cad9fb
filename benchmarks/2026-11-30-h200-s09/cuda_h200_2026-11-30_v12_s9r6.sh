#!/bin/bash
# Session 9, run 6: the final build (moe_down_acc default): Llama and Qwen3 interleaved, and the MoE checks.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
d() { env $2 timeout 60 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log | grep -oE "[0-9.]+ tok/s"); echo "$1,$2,$r" >> $OUT/s9r6.csv; grep "copy rate" $OUT/d.log | head -1; }
d llama-3.1-8b-4bit X=1; d qwen3-30b-a3b-4bit X=1; d llama-3.1-8b-4bit X=1; d qwen3-30b-a3b-4bit X=1
timeout 100 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestMoEDecode|TestModelsGPU' > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "^--- " $OUT/t.log
echo "== table"; cat $OUT/s9r6.csv
