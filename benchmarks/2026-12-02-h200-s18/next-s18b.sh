# next-s18b (prepared in session 17; not run yet): is the many-row 4-bit products' limit the order they read the
# weights in (32 bytes of each of 128 rows a 64-k step)? notes/cuda-session-17.md, "The weight layout question".
# 1. TestConformanceVariants/qmm_{w128t,widet,m2d1t} and tiled (every 4-bit product on the tiled copy): the
#    tiled-layout candidates against the CPU.
# 2. TestBenchReadPattern: the 4096x14336 4-bit matrix read with no math in the GEMV's order (rp_rows), in
#    qmm4_w128's (rp_slab32, 1-8 steps in flight a thread), 128 and 512 bytes a step, and from tiles (rp_tile32).
# 3. TestBenchQMM: qmm4_w128_t, qmm4_bf_64_t, qmm4_bf_64_m2d1_t beside their row-layout forms; TestBenchTiledRows:
#    the 1-32 row kernels (the one-row GEMV and qmma4; a batch-8 step took 5.9 ms against 2.3 at one row, issue 21
#    asks <= 1.25x) on both layouts (qgemv4t_bf, qmma4_*_t).
# 4. TestBenchBatchDecodeTuning: whole decode steps of synthetic Llama-3.1-8B at 1, 8, 64 and 128 sequences with every
#    product tiled (Tuning.Tiled) against the default (s15b: 2.30 / 5.93 / 9.44 / 13.2 ms).
# Predictions, if the layout is the limit: rp_rows >= 0.7 of the copy rate, rp_slab32 <= 0.25 at every depth,
# rp_slab128 ~0.5, rp_slab512 and rp_tile32 near rp_rows; at 128 rows qmm4_w128_t 4096x14336 <= 40 us (qmm4_w128
# 68.7 in s16a), 14336x4096 <= 35 (53.7), 4096x4096 <= 20 (30.6); at 64 rows qmm4_bf_64_t 14336x4096 <= 30 us
# (qmm_wide 45.8), 4096x14336 <= 35 (m2d1 49.0); at 8 rows qmma4 from ~0.25 of the copy rate to >= 0.45; at one row
# qgemv4t_bf within 10% of qgemvm4 (0.34 / 0.53 / 0.60 / 0.16 / 0.71 of the copy rate on the five shapes, v80), so
# one layout could serve every row count; whole steps tiled: batch 8 <= 4 ms, batch 64 <= 7.5 ms. If depth lifts rp_slab32 to rp_rows, the kernels are latency-bound;
# if neither moves, the limit is in the kernels (next-s16b's ncu).
set -u
gunzip -kf .gpu/cuda.test.gz; chmod +x .gpu/cuda.test
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/^(qmm_w128t|qmm_widet|qmm_m2d1t|tiled)$' > $OUT/tq.log 2>&1; echo "tiled conformance rc=$? $(el) s"
grep -E "^    --- (FAIL|PASS|SKIP)|^(FAIL|ok|panic)" $OUT/tq.log | head -8
MLXCEL_CUDA_BENCH=1 timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchReadPattern$' > $OUT/rp.log 2>&1; echo "read patterns rc=$? $(el) s"
grep -E "^(bench|copy|readpattern)," $OUT/rp.log > $OUT/readpattern_s18b.csv
MLXCEL_CUDA_BENCH=1 timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchQMM$' > $OUT/qmm.log 2>&1; echo "qmm bench rc=$? $(el) s"
grep -E "^(bench|copy|linear)," $OUT/qmm.log > $OUT/qmm_tiled_s18b.csv
MLXCEL_CUDA_BENCH=1 timeout 90 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchTiledRows$' > $OUT/qmma.log 2>&1; echo "qmma bench rc=$? $(el) s"
grep -E "^(bench|copy|linear)," $OUT/qmma.log > $OUT/qmma_tiled_s18b.csv
MLXCEL_CUDA_BENCH=1 timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuning$' > $OUT/batch.log 2>&1; echo "batch steps rc=$? $(el) s"
grep -E "^(tuning|default|notile|qmm17|w128|noqmmw|tiled)," $OUT/batch.log > $OUT/batch_tiled_s18b.csv
echo "== read patterns"; cut -d, -f2,5-7 $OUT/readpattern_s18b.csv
echo "== qmm (64 and 128 rows)"; grep -E "^linear," $OUT/qmm_tiled_s18b.csv | grep -E ",(64|128)," | grep -v before | cut -d, -f2-7
echo "== qmma (1-32 rows)"; grep -E "^linear," $OUT/qmma_tiled_s18b.csv | cut -d, -f2-7
echo "== batch steps"; cat $OUT/batch_tiled_s18b.csv
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
