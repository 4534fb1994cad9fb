# s12r3 (issue 21): qmm4 with x two slabs ahead, q/k/v and gate/up joined into one launch (segments), and two
# variants of the 64-row tile (_d3: 3 weight slabs in flight, spilling; _w1: one block an SM, 6 slabs).
# GPU tests, TestBenchQMM (all variants against qmma4/cuBLAS, interleaved), then the batch ladder of the
# build before this session (base, cb911a7) and this one, interleaved. Synthetic Llama-3.1-8B 4-bit weights.
set -u
for f in .gpu/mlxcel .gpu/cuda.test .gpu/base/mlxcel; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 280 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance|TestGraphReplay|TestModelsGPU|TestMoEDecode$|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|> [0-9.e-]+$|engine_gpu_test.go:1[0-9][0-9]" $OUT/t.log | head -30; grep -c -- "--- PASS" $OUT/t.log
MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_CSV=$OUT/qmm.csv timeout 170 .gpu/cuda.test -test.count=1 -test.run 'TestBenchQMM$' > $OUT/bq.log 2>&1; echo "benchqmm rc=$?"
for who in base new base new; do bin=.gpu/mlxcel; [ $who = base ] && bin=.gpu/base/mlxcel
  timeout 100 $bin bench decode --profile llama-3.1-8b-4bit --backend cuda --batch 1,8,32,48,64,128,256 --context 1024 --steps 16 $TOK --csv $OUT/batch_$who.csv > $OUT/b.log 2>&1; echo "batch $who rc=$?"; done
echo "== table"; cut -d, -f2-7 $OUT/qmm.csv | paste -sd' ' | sed 's/linear,/\n/g'; echo; for who in base new; do echo $who; cut -d, -f2,5,6 $OUT/batch_$who.csv | paste -sd' '; done
