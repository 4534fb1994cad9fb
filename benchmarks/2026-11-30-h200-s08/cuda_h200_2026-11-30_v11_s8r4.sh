#!/bin/bash
# Session 8, run 4: in-graph marginal costs (MLXCEL_CUDA_SKIP) under pipelined decode; ncu of attn_decode at ~260 keys.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
d() { env $2 timeout 100 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log | grep -oE "[0-9.]+ tok/s"); echo "$1,$2,$r" | tee -a $OUT/s8r4.csv; }
Q=qwen3-30b-a3b-4bit; L=llama-3.1-8b-4bit
d $L X=1; d $L MLXCEL_CUDA_SKIP=attn_decode_128; d $L MLXCEL_CUDA_SKIP=add_rmsnorm
d $Q X=1; d $Q MLXCEL_CUDA_SKIP=add_rmsnorm; d $Q MLXCEL_CUDA_SKIP=qgemvm4_bf_g64; d $Q MLXCEL_CUDA_SKIP=qgemvm4_bf; d $Q MLXCEL_CUDA_SKIP=moe_down_sum4_bf_g32
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for m in $Q $L; do
timeout 150 $NCU --clock-control none -k regex:attn_decode --launch-count 1 --set full --import-source no --page details \
  .gpu/mlxcel bench decode --profile $m --backend cuda --prompt-tokens 256 --max-tokens 4 --repeat 1 --warmup 0 $TOK > $OUT/ncu_$m.txt 2>&1
grep -E "attn_decode|Duration|Registers Per|Achieved Occ|Grid Size|Warp Cycles Per Issued|Executed Ipc A|Issue Slots Busy" $OUT/ncu_$m.txt | head -12
done
timeout 120 $NCU --clock-control none -k regex:attn_decode --launch-count 1 --section SourceCounters --section WarpStateStats --import-source no --page source --print-source sass --csv \
  .gpu/mlxcel bench decode --profile $Q --backend cuda --prompt-tokens 256 --max-tokens 4 --repeat 1 --warmup 0 $TOK > $OUT/ncu_src_q.csv 2>&1
wc -l $OUT/ncu_src_q.csv
