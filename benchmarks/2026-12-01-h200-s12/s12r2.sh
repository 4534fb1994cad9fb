# s12r2 (issue 21): the fused qmm4 kernels (4-bit products of 33-256 activation rows, weights dequantized in
# registers into bf16 mma; plan.PlanQMM). GPU tests (conformance with the qmm9/noqmm variants, models, engine
# batch invariance), TestBenchQMM (qmm4 against qmma4/cuBLAS at 8-512 rows, interleaved), then the batch
# ladder of decode steps. Synthetic Llama-3.1-8B 4-bit weights of the real shapes.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 280 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance|TestGraphReplay|TestModelsGPU|TestMoEDecode$|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|cuda_test|engine_gpu" $OUT/t.log | head -30; grep -c -- "--- PASS" $OUT/t.log
MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_CSV=$OUT/qmm.csv timeout 150 .gpu/cuda.test -test.count=1 -test.run 'TestBenchQMM$' > $OUT/bq.log 2>&1; echo "benchqmm rc=$?"
timeout 120 .gpu/mlxcel bench decode --profile llama-3.1-8b-4bit --backend cuda --batch 1,8,16,32,33,64,128,256 --context 1024 --steps 16 $TOK --csv $OUT/batch_qmm.csv > $OUT/b.log 2>&1; echo "batch rc=$?"
echo "== table"; cut -d, -f1-7 $OUT/qmm.csv; cut -d, -f1-10 $OUT/batch_qmm.csv; tail -3 $OUT/b.log
