#!/bin/bash
# Session 9, run 5: moe_down_acc with 8 warps (a slot each) checked and timed against the default, interleaved.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestMoEDecode|TestConformanceVariants/moedownacc/MoE' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- )?FAIL|panic|^--- (PASS|SKIP)|^    --- FAIL" $OUT/t.log | head
d() { env $2 timeout 70 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log | grep -oE "[0-9.]+ tok/s"); echo "$1,$2,$r" >> $OUT/s9r5.csv; }
Q=qwen3-30b-a3b-4bit
d $Q X=1; d $Q MLXCEL_CUDA_MOEDOWN=acc; d $Q X=1; d $Q MLXCEL_CUDA_MOEDOWN=acc
echo "== table"; cat $OUT/s9r5.csv
