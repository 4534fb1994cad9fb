# s10r4: a group of 8 query heads in blocks of 4 past 1024 keys (first form of longHeads): tests, ceilings,
# the Qwen3 ladder against MLXCEL_CUDA_DECLONGHEADS=0 (the whole group), a decode pair.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$/(AttentionLong|DecodeLayer|Attention$)|TestModelsGPU' > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "AttentionLong/8x1|^--- |^(PASS|FAIL)" $OUT/t.log | head -12
MLXCEL_CUDA_DECLONGHEADS=0 timeout 60 .gpu/cuda.test -test.count=1 -test.run 'TestConformance$/AttentionLong' > $OUT/t2.log 2>&1; echo "longheads=0 test rc=$?"
MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_CSV=$OUT/ceilings.csv timeout 60 .gpu/cuda.test -test.count=1 -test.run 'TestCeilings' > $OUT/ceil.log 2>&1; echo "ceilings rc=$?"; tail -4 $OUT/ceil.log
A="--backend cuda --max-tokens 64 --max-prefill-seconds 60 --out $OUT/ladder --profiles qwen3-30b-a3b-4bit $TOK"
timeout 100 .gpu/mlxcel bench ladder $A --lengths 512,2048,8192,32768 > $OUT/l1.log 2>&1; echo "ladder new rc=$?"
MLXCEL_CUDA_DECLONGHEADS=0 timeout 90 .gpu/mlxcel bench ladder $A --lengths 2048,8192,32768 --name ladder_lh0 > $OUT/l2.log 2>&1; echo "ladder longheads=0 rc=$?"
rm -f $OUT/ladder/*.md $OUT/ladder/*.svg $OUT/ladder/*.png
d() { env $2 timeout 70 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log); echo "$1 $2 ${r:-FAIL $(tail -2 $OUT/d.log)}" | tee -a $OUT/sum.txt; }
d qwen3-30b-a3b-4bit X=1; d llama-3.1-8b-4bit X=1
echo "== table"; grep -E "^ +[a-z].*(ok|SKIP|FAIL)" $OUT/l1.log $OUT/l2.log; cat $OUT/sum.txt
