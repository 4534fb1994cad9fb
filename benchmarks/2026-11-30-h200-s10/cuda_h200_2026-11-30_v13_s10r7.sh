# s10r7: Qwen3 long-context decode with 2, 4 (then the default) and 1 query heads a block past 1024 keys.
export MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
l() { env $1 timeout 70 .gpu/mlxcel bench ladder --backend cuda --max-tokens 64 --out /tmp/lad --profiles qwen3-30b-a3b-4bit $TOK --lengths 2048,8192,32768 --quiet > $OUT/l.log 2>&1; grep -E "^ +[a-z].*(ok|SKIP|FAIL)" $OUT/l.log | sed "s|^|$1 |" | tee -a $OUT/sum.txt; }
l MLXCEL_CUDA_DECLONGHEADS=2; l X=1; l MLXCEL_CUDA_DECLONGHEADS=1
