#!/bin/bash
# Session 9, run 3: the new defaults checked on the GPU (MoE, models), MLXCEL_CUDA_MOEPRE (down_sum loads
# its weights before its wait) conformance and A/B, attention waves for Qwen3, in-graph costs by SKIP.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 240 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestMoEDecode|TestModelsGPU|TestEngineRunAheadGPU|TestConformanceVariants/moepre/MoE|TestConformance$/(MoE|DecodeLayer|Attention)' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- )?FAIL|panic|^--- (PASS|SKIP)|^    --- FAIL" $OUT/t.log | head
d() { env $2 timeout 70 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log | grep -oE "[0-9.]+ tok/s"); echo "$1,$2,$r" >> $OUT/s9r3.csv; }
Q=qwen3-30b-a3b-4bit
d $Q X=1; d $Q MLXCEL_CUDA_MOEPRE=1; d $Q X=1; d $Q MLXCEL_CUDA_MOEPRE=1; d $Q MLXCEL_CUDA_DECWAVES=5
d llama-3.1-8b-4bit X=1
d $Q MLXCEL_CUDA_SKIP=add_rmsnorm; d $Q MLXCEL_CUDA_SKIP=moe_down_sum4_bf_g32; d $Q MLXCEL_CUDA_SKIP=moe_gateup4_bf_g64_o6
grep -E "copy rate" $OUT/d.log | head -1
echo "== table"; cat $OUT/s9r3.csv
