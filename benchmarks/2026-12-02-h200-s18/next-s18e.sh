# next-s18e: qmma4's K-split _xc kernels as the default for 2-16 rows (s18d's "ks": batch-8 step 4.85 against 5.91 ms),
# the 17-32 row candidates, and the DecodeLayer failure s18d hit when DecodeLayer was the first op of a fresh process.
# 1. TestConformance/^DecodeLayer$ alone in a fresh process (s18d: step 1 NaN, then CUDA_ERROR_INVALID_CONTEXT); if it
#    fails, again under compute-sanitizer (memcheck) to name the kernel.
# 2. TestConformance (the new LinearFew: 2-32 rows, K split 3-8 ways, bias, q/k/v on one x), the qmma_ks variant's
#    Linear and LinearFew, the engine and model GPU tests (batch invariance among 63 others).
# 3. TestBenchFewRows (1-32 rows; at 24 and 32 rows qmma4_bf_4 against its K-split form qmma4_bf_4_ks, 120 bytes of
#    spills at 128 registers, and qmm4 "qmm17") and TestBenchBatchDecodeTuning (batch 8/16 now ks; 24/32 with ks and qmm17).
# Predictions: DecodeLayer alone fails again (a fresh-process bug, not b2's); batch-8 step ~4.85 ms, batch 16 ~6.3;
# at 24-32 rows qmm17 beats both qmma forms (s18d: steps 7.86 / 8.36 against 10.6 / 11.5 ms) and ks4 lands between.
set -u
gunzip -kf .gpu/cuda.test.gz; chmod +x .gpu/cuda.test
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 90 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$/^DecodeLayer$' > $OUT/dl.log 2>&1; rc=$?
echo "DecodeLayer alone rc=$rc $(el) s"; grep -E "^    --- |^(FAIL|ok|panic)|CUDA_ERROR" $OUT/dl.log | head -5
if [ $rc != 0 ]; then
  timeout 150 compute-sanitizer --report-api-errors no --print-limit 5 .gpu/cuda.test -test.count=1 -test.run 'TestConformance$/^DecodeLayer$' > $OUT/dl_san.log 2>&1
  echo "sanitizer rc=$? $(el) s"; grep -E "Invalid|Error|at 0x|by thread|in [a-z_0-9]+$|ERROR SUMMARY" $OUT/dl_san.log | head -12
fi
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$' > $OUT/conf.log 2>&1; echo "conformance rc=$? $(el) s"
grep -E "^    --- FAIL|^(FAIL|ok|panic)|CUDA_ERROR" $OUT/conf.log | head -8; grep -c "^    --- PASS" $OUT/conf.log
timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/^qmma_ks$/^(Linear|LinearFew)$' > $OUT/ks.log 2>&1; echo "qmma_ks rc=$? $(el) s"
grep -E "^        --- |^(FAIL|ok|panic)" $OUT/ks.log | head -4
timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestModelsGPU|TestEngineBatchInvarianceGPU|TestEngineRunAheadGPU' > $OUT/eng.log 2>&1; echo "engine/models rc=$? $(el) s"
grep -E "^--- |^(FAIL|ok|panic)" $OUT/eng.log | head -6
MLXCEL_CUDA_BENCH=1 timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchFewRows$' > $OUT/few.log 2>&1; echo "few rows bench rc=$? $(el) s"
grep -E "^(bench|copy|linear)," $OUT/few.log > $OUT/cuda_h200_fewrows_s18e.csv
MLXCEL_CUDA_BENCH=1 timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuning$' > $OUT/batch.log 2>&1; echo "batch steps rc=$? $(el) s"
grep -E "^(tuning|default|notile|qmm17|w128|noqmmw|ks)," $OUT/batch.log > $OUT/cuda_h200_batch_s18e.csv
echo "== few rows (config, rows, shape, us, GB/s, of copy)"; grep -E "^linear," $OUT/cuda_h200_fewrows_s18e.csv | cut -d, -f2-7
echo "== batch steps"; cat $OUT/cuda_h200_batch_s18e.csv
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
