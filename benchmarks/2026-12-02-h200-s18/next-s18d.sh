# next-s18d: qmma4's occupancy candidates for 2-16 rows (s18c: qmma4_bf_1_xc at 182 registers, one block of 8 warps
# an SM, 12.6% occupancy, issue slots 26-31% busy, each warp issuing once in 5.6 cycles: the warps' instruction
# latency, not DRAM (18-22% of peak), sets the time). b2: the 32-row block at <= 128 registers, two an SM (2 slabs in
# flight a warp instead of 4); r1: 16 rows a block, two an SM (2x the blocks, 2x the x reads from L2); r1b3: 16 rows,
# three an SM; ks: b2 with K split over a cluster of blocks (about two blocks an SM over the grid).
# Predictions: at 8 rows b2 1.3-1.6x faster on 14336x4096 (448 blocks: 1.7 waves instead of 3.4) and ~1.0x on
# 4096x4096 (128 blocks: fewer than the SMs either way); r1 / r1b3 1.3-1.8x on all three shapes (256-896 blocks);
# ks 1.5-2x on the 4096-row shapes (128 blocks -> 256); batch-8 step from 5.9 ms to 4.0-4.5 ms with the best.
set -u
gunzip -kf .gpu/cuda.test.gz; chmod +x .gpu/cuda.test
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/^qmma_(b2|r1|r1b3|ks)$/^(Linear|LinearLong|LinearMany|LinearNorm|LinearSharedX|DecodeLayer|Sequences)$' > $OUT/tq.log 2>&1
echo "qmma candidates conformance rc=$? $(el) s"; grep -E "^    --- (FAIL|PASS|SKIP)|^(FAIL|ok|panic)" $OUT/tq.log | head -8
MLXCEL_CUDA_BENCH=1 timeout 90 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchFewRows$' > $OUT/few.log 2>&1; echo "few rows bench rc=$? $(el) s"
grep -E "^(bench|copy|linear)," $OUT/few.log > $OUT/cuda_h200_fewrows_s18d.csv
MLXCEL_CUDA_BENCH=1 timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuning$' > $OUT/batch.log 2>&1; echo "batch steps rc=$? $(el) s"
grep -E "^(tuning|default|notile|qmm17|w128|noqmmw|b2|r1|r1b3|ks)," $OUT/batch.log > $OUT/cuda_h200_batch_s18d.csv
echo "== few rows (config, rows, shape, us, GB/s, of copy)"; grep -E "^linear," $OUT/cuda_h200_fewrows_s18d.csv | cut -d, -f2-7
echo "== batch steps"; cat $OUT/cuda_h200_batch_s18d.csv
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
