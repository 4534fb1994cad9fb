#!/bin/bash
# Session 8, run 5: one-head attn_decode kernels (_h1, 93 registers), q/k write-back dropped when the caller
# does not read them (ScratchQK), norm weights loaded before the wait; against the pipelined build (s8r2).
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 120 .gpu/cuda.test -test.count=1 -test.run 'TestConformance$/DecodeLayer|TestConformanceVariants/h1off/DecodeLayer|TestModelsGPU' > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "^(--- )?FAIL|panic|error .*>" $OUT/t.log | head -5
d() { env $3 timeout 100 .gpu/$2 bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log | grep -oE "[0-9.]+ tok/s"); echo "$1,$2,$3,$r" | tee -a $OUT/s8r5.csv; }
Q=qwen3-30b-a3b-4bit; L=llama-3.1-8b-4bit
d $L mlxcel_old X=1; d $L mlxcel X=1; d $L mlxcel MLXCEL_CUDA_DECWAVES=4
d $Q mlxcel_old X=1; d $Q mlxcel X=1; d $Q mlxcel MLXCEL_CUDA_DECWAVES=4; d $Q mlxcel MLXCEL_CUDA_DECWAVES=3; d $Q mlxcel MLXCEL_CUDA_DECH1=0
