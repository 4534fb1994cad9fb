# s11r1 (issue 20): the build with the losing variants deleted (new) against the last build before it (base,
# 17a3b59): GPU tests of the new build, then batch-1 decode interleaved base/new twice for Llama-3.1-8B and
# Qwen3-30B-A3B, then the Llama long-prompt ladder with each. Synthetic weights of the real shapes.
set -u
for f in .gpu/mlxcel .gpu/base/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 220 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestLibrary|TestSmoke|TestConformance|TestGraphReplay|TestModelsGPU|TestMoEPrefill$|TestMoEDecode$|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)" $OUT/t.log | head -20; grep -c "^    --- PASS\|^--- PASS" $OUT/t.log
d() { timeout 75 $1 bench decode --profile $2 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log); echo "$3 $2 ${r:-FAIL $(tail -2 $OUT/d.log)}" | tee -a $OUT/sum.txt; }
L=llama-3.1-8b-4bit Q=qwen3-30b-a3b-4bit B=.gpu/base/mlxcel N=.gpu/mlxcel
for pair in 1 2; do d $B $L base; d $N $L new; d $B $Q base; d $N $Q new; done
MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_CSV=$OUT/ceilings.csv timeout 60 .gpu/cuda.test -test.count=1 -test.run 'TestCeilings$' > /dev/null 2>&1; cat $OUT/ceilings.csv 2>/dev/null | tail -3
for who in base new; do bin=$B; [ $who = new ] && bin=$N
  timeout 100 $bin bench ladder --backend cuda --profiles $L --lengths 2048,8192 --max-tokens 64 $TOK --out $OUT/ladder_$who > $OUT/l_$who.log 2>&1; echo "ladder $who rc=$?"
  grep -E "^ +[a-z].*(ok|FAIL)" $OUT/l_$who.log | sed "s/^/$who /" | tee -a $OUT/sum.txt; done
rm -rf $OUT/ladder_*/*.svg $OUT/ladder_*/*.png
echo "== table"; cat $OUT/sum.txt
