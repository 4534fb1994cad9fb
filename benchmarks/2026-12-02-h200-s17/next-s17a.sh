# next-s17a: the illegal address of s16a. In s16a TestEngineBatchInvarianceGPU (tiny Llama q4, 64 sequences, logprobs)
# failed with CUDA_ERROR_ILLEGAL_ADDRESS at "sampling 64 rows" and poisoned the context for every later test.
# 1. the failing test alone; 2. the tests that failed after it, without it (do they fail on their own?);
# 3. compute-sanitizer memcheck on the failing test alone: which kernel.
set -u
for f in .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestEngineBatchInvarianceGPU' > $OUT/alone.log 2>&1; echo "alone rc=$? $(el) s"
grep -E "^(--- FAIL|--- PASS|FAIL|ok|panic)" $OUT/alone.log | head -5; grep -m3 "ILLEGAL\|error" $OUT/alone.log | cut -c1-200
timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestEnginePrefixCacheWindowedGPU|TestModelsGPU|TestEngineRunAheadSampledGPU|TestEnginePreparedConstrainedGPU|TestEngineRowSampling' > $OUT/others.log 2>&1; echo "others rc=$? $(el) s"
grep -E "^(--- FAIL|--- PASS|FAIL|ok|panic)" $OUT/others.log | head -12; grep -m3 "ILLEGAL" $OUT/others.log | cut -c1-200
timeout 300 compute-sanitizer --tool memcheck --print-limit 8 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestEngineBatchInvarianceGPU' > $OUT/san.log 2>&1; echo "sanitizer rc=$? $(el) s"
grep -E -A6 "^========= (Invalid|Out of|Address)" $OUT/san.log | head -40
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
