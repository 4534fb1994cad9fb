# s11r2 (issue 20): the final build (variants deleted, planners) against 17a3b59 (base): GPU tests, batch-1 decode
# interleaved base/new twice for Llama-3.1-8B and Qwen3-30B-A3B, the long-prompt ladder (2048, 8192) with each.
set -u
export MLXCEL_TESTDATA=$PWD/.gpu/testdata
for f in .gpu/mlxcel .gpu/base/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
d() { timeout 75 $1 bench decode --profile $2 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log); echo "$3 $2 ${r:-FAIL $(tail -2 $OUT/d.log)}" | tee -a $OUT/sum.txt; }
L=llama-3.1-8b-4bit Q=qwen3-30b-a3b-4bit B=.gpu/base/mlxcel N=.gpu/mlxcel
timeout 150 .gpu/cuda.test -test.count=1 -test.run "TestConformance$|TestConformanceVariants|TestModelsGPU|TestMoEDecode$|TestEngine" > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "^(--- FAIL|FAIL|ok|PASS)" $OUT/t.log | head
for pair in 1 2; do d $B $L base; d $N $L new; d $B $Q base; d $N $Q new; done
for who in base new; do bin=$B; [ $who = new ] && bin=$N
  timeout 100 $bin bench ladder --backend cuda --profiles $L,$Q --lengths 2048,8192 --max-tokens 64 $TOK --out $OUT/ladder_$who > $OUT/l_$who.log 2>&1; echo "ladder $who rc=$?"
  grep -E "^ +[a-z].*(ok|FAIL)" $OUT/l_$who.log | sed "s/^/$who /" | tee -a $OUT/sum.txt; done
rm -rf $OUT/ladder_*
echo "== table"; cat $OUT/sum.txt
