#!/bin/bash
# Session 8, run 3: in-graph costs and attention/fold variants under pipelined decode (spread +-0.2%).
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 100 .gpu/cuda.test -test.count=1 -test.run 'TestConformanceVariants/decpf/(Decode|Attention)' > $OUT/tv.log 2>&1; echo "decpf variants rc=$?"; grep -E "^(--- )?FAIL|panic" $OUT/tv.log | head -5
d() { env $2 timeout 100 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log | grep -oE "[0-9.]+ tok/s"); echo "$1,$2,$r" | tee -a $OUT/s8r3.csv; }
Q=qwen3-30b-a3b-4bit; L=llama-3.1-8b-4bit
d $Q X=1; d $Q MLXCEL_CUDA_DECPF=1; d $Q MLXCEL_CUDA_SKIP=attn_decode_128; d $Q MLXCEL_CUDA_DECWAVES=1; d $Q MLXCEL_CUDA_DECSPLITKEYS=32
d $Q MLXCEL_CUDA_NORMFUSE=heads,router; d $Q MLXCEL_CUDA_NORMFUSE=heads,gemv; d $Q MLXCEL_CUDA_NORMFUSE=0; d $Q X=1
d $L X=1; d $L MLXCEL_CUDA_DECPF=1; d $L MLXCEL_CUDA_NORMFUSE=heads,gemv; d $L X=1
