#!/bin/bash
# Session 9, run 4: moe_down_acc (MLXCEL_CUDA_MOEDOWN=acc, 4 warps) checked and timed against the default
# (MOEPRE on), interleaved; Llama; long-context ladder with two-head blocks (DECHEADS=2) against the default _h4.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 240 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestMoEDecode|TestModelsGPU|TestConformanceVariants/(moedownacc|moepreoff)/MoE|TestConformance$/MoE' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- )?FAIL|panic|^--- (PASS|SKIP)|^    --- FAIL" $OUT/t.log | head
d() { env $2 timeout 70 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log | grep -oE "[0-9.]+ tok/s"); echo "$1,$2,$r" >> $OUT/s9r4.csv; }
Q=qwen3-30b-a3b-4bit
d $Q X=1; d $Q MLXCEL_CUDA_MOEDOWN=acc; d $Q X=1; d $Q MLXCEL_CUDA_MOEDOWN=acc; d $Q "MLXCEL_CUDA_MOEDOWN=acc MLXCEL_CUDA_MOEPRE=0"
d llama-3.1-8b-4bit X=1; d $Q MLXCEL_CUDA_MOEDOWN=acc
grep -E "copy rate" $OUT/d.log | head -1
l() { env $1 timeout 100 .gpu/mlxcel bench ladder --backend cuda --profiles llama-3.1-8b-4bit --lengths 8192,32768 --max-tokens 64 $TOK --out $OUT/ladder --name "l_$2" > $OUT/l_$2.log 2>&1; grep -E "^ +llama" $OUT/l_$2.log | sed "s|^|ladder $1: |"; }
l X=1 def; l MLXCEL_CUDA_DECHEADS=2 h2
echo "== table"; cat $OUT/s9r4.csv
