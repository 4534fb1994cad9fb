# s10r6: Qwen3 decode after 512 and 1024 prompt tokens with 4 and 2 query heads a block (MLXCEL_CUDA_DECHEADS
# applies at every context), same build as s10r4.
export MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
l() { env $1 timeout 60 .gpu/mlxcel bench ladder --backend cuda --max-tokens 64 --out /tmp/lad --profiles qwen3-30b-a3b-4bit $TOK --lengths 512,1024 --quiet > $OUT/l.log 2>&1; grep -E "^ +[a-z].*(ok|SKIP|FAIL)" $OUT/l.log | sed "s|^|$1 |" | tee -a $OUT/sum.txt; }
l X=1; l MLXCEL_CUDA_DECHEADS=4; l MLXCEL_CUDA_DECHEADS=2; l X=1
