# next-s16b (prepared in session 16, not run): why qmm4_w128 is flat in the row count (notes/cuda-kernels.md "Start
# here" 1). Nsight Compute on TestBenchQMM's 4096x14336 product (the largest weight, 58 MB of 4-bit words) at 64 and
# 128 rows, qmm4_w128 beside qmm4: stall reasons, DRAM throughput, L2 hit rate, issue slots, shared-memory bank
# conflicts. First a probe that ncu reads counters on this machine (H200.md: Firecracker yes, gVisor no).
# Predictions: qmm4_w128 DRAM throughput ~15% of peak; the top warp stall "long scoreboard" or "barrier" (the
# consumers wait on the weight ring's cp.async groups: 2-3 slabs in flight); qmm4 "math pipe throttle"/"wait".
set -u
for f in .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc MLXCEL_CUDA_BENCH=1
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 60 .gpu/cuda.test -test.count=1 -test.run 'TestKernelProgramsCompile' > $OUT/warm.log 2>&1; echo "warm cache rc=$? $(el) s"
NCU="ncu --clock-control none --target-processes all"
timeout 120 $NCU -k regex:'qmm4_w128|qmm4_bf_64' -c 2 --section SpeedOfLight .gpu/cuda.test -test.count=1 -test.run 'TestBenchQMM$' > $OUT/ncu_probe.log 2>&1
echo "ncu probe rc=$? $(el) s"; grep -m3 -iE "error|LibraryNotLoaded|not supported|Duration|DRAM Throughput" $OUT/ncu_probe.log
timeout 300 $NCU -k regex:'qmm4_w128|qmm4_bf_64' -c 12 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section Occupancy --csv .gpu/cuda.test -test.count=1 -test.run 'TestBenchQMM$' > $OUT/ncu_qmm.csv 2> $OUT/ncu_qmm.log
echo "ncu qmm rc=$? $(el) s"
grep -E "Kernel Name|Duration|DRAM Throughput|L2 Hit|Stall|Issue Slots|Achieved Occupancy" $OUT/ncu_qmm.csv | cut -c1-200 | head -60
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
