# s10r5: the Qwen3 ladder again (s10r4's CSVs did not come back), same build as s10r4.
export MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 120 .gpu/mlxcel bench ladder --backend cuda --max-tokens 64 --max-prefill-seconds 60 --out $OUT --name ladder_qwen3 --profiles qwen3-30b-a3b-4bit $TOK --lengths 512,2048,8192,32768 > $OUT/l1.log 2>&1; echo "ladder rc=$?"
rm -f $OUT/*.md $OUT/*.svg $OUT/*.png; grep -E "^ +[a-z].*(ok|SKIP|FAIL)" $OUT/l1.log
