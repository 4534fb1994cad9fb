#!/bin/bash
# Session 9, run 1: the prepared variants' conformance, the engine's run-ahead on the GPU,
# Llama decode with the bandwidth line, Qwen3 decode A/B over the MoE variants.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 220 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/(routeblock|moegu32|moeguo6|moepf|dechg)/(MoE|DecodeLayer)|TestMoEDecode|TestModelsGPU|TestEngineRunAheadGPU' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- )?FAIL|panic|bulk prefetch|^--- (PASS|SKIP)" $OUT/t.log | head -30
d() { env $2 timeout 70 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log | grep -oE "[0-9.]+ tok/s"); echo "$1,$2,$r" >> $OUT/s9r1.csv; grep -E "copy rate|prefetch" $OUT/d.log | head -3 | sed "s|^|  $1 $2: |"; }
d llama-3.1-8b-4bit X=1
Q=qwen3-30b-a3b-4bit; d $Q X=1; d $Q MLXCEL_CUDA_ROUTE=block; d $Q MLXCEL_CUDA_MOEGU=32; d $Q MLXCEL_CUDA_MOEGU=o6; d $Q MLXCEL_CUDA_MOEPF=1
d $Q "MLXCEL_CUDA_ROUTE=block MLXCEL_CUDA_MOEGU=o6 MLXCEL_CUDA_MOEPF=1"; d $Q X=1
cp $OUT/d.log $OUT/d_last.log
echo "== table"; cat $OUT/s9r1.csv
