# s10r8: the final longHeads (2 heads a block up to 4096 keys, 4 beyond): AttentionLong with it and with 4, and
# the Qwen3 rows of benchmarks/2026-11-30-h200-s10/cuda_h200_longprompt_2026-11-30.csv.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 100 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$/AttentionLong|TestConformanceVariants/longheads4/AttentionLong' > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "AttentionLong/8x1|^--- |^(PASS|FAIL)" $OUT/t.log | head -12
timeout 75 .gpu/mlxcel bench ladder --backend cuda --max-tokens 64 --out $OUT --name ladder_qwen3 --profiles qwen3-30b-a3b-4bit $TOK --lengths 512,2048,8192,32768 > $OUT/l1.log 2>&1; echo "ladder rc=$?"
rm -f $OUT/*.md $OUT/*.svg $OUT/*.png; grep -E "^ +[a-z].*(ok|SKIP|FAIL)" $OUT/l1.log
