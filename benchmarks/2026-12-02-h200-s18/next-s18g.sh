# next-s18g: does s18d's DecodeLayer failure (step 1 NaN, then CUDA_ERROR_INVALID_CONTEXT, DecodeLayer the first
# subtest of TestConformanceVariants' first variant in a fresh process) come back? s18e: TestConformance/DecodeLayer
# alone passed. Three fresh processes of variants with DecodeLayer first; compute-sanitizer on the first failure.
# Prediction: it does not reproduce (a one-off), or it does in the variants' path (a backend per variant).
set -u
gunzip -kf .gpu/cuda.test.gz; chmod +x .gpu/cuda.test
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
for i in 1 2 3; do
  timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/^(ticketmerge|noqmm|qmm17)$/^(DecodeLayer|Linear)$' > $OUT/v$i.log 2>&1; rc=$?
  echo "run $i rc=$rc $(el) s: $(grep -c -- '--- PASS' $OUT/v$i.log) pass, $(grep -c -- '--- FAIL' $OUT/v$i.log) fail"
  if [ $rc != 0 ]; then
    grep -m3 -E "NaN|CUDA_ERROR" $OUT/v$i.log
    timeout 120 compute-sanitizer --report-api-errors no --print-limit 5 .gpu/cuda.test -test.count=1 -test.run 'TestConformanceVariants/^(ticketmerge|noqmm|qmm17)$/^(DecodeLayer|Linear)$' > $OUT/san.log 2>&1
    echo "sanitizer rc=$? $(el) s"; grep -E "Invalid|Error|at 0x|by thread|ERROR SUMMARY" $OUT/san.log | head -12
    break
  fi
done
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
