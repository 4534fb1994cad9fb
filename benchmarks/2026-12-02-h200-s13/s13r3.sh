# s13r3 (issue 21): attn_dtile with the ticket merge (more splits than a cluster) and at every batch (tile1,
# measured against attn_decode at 1 and 8 sequences, 128 to 32768 keys); the qmm4 forms with two m16 tiles a
# warp (m2: 4 warps, 2 blocks an SM; m2d1: one weight slab in flight, 3 blocks), in TestBenchQMM and in the
# batch step. Predictions: tile1 wins at 1k+ keys (s13r2: 2.25 against 2.96 ms at 1 x 1024) and loses at 32k
# with one sequence only if the 64 splits do not fill the card; m2 cuts the qmm4 share of a 64-row step
# (7.8 ms) by 20-30% if shared-memory traffic of x fragments is the limit, nothing if the weight stream is.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
timeout 240 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestConformanceVariants/(qmm_m2|qmm_m2d1|tile1|tile1ticket)$|TestModelsGPU|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|^        --- FAIL|> [0-9.e-]+$" $OUT/t.log | head -20; grep -c -- "--- PASS" $OUT/t.log
MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_CSV=$OUT/qmm.csv timeout 150 .gpu/cuda.test -test.count=1 -test.run 'TestBenchQMM$' > $OUT/bq.log 2>&1; echo "benchqmm rc=$?"
MLXCEL_CUDA_BENCH=1 timeout 240 .gpu/cuda.test -test.count=1 -test.run 'TestBenchBatchDecodeTuning$' > $OUT/tune.csv 2> $OUT/tune.err; echo "tune rc=$?"; tail -3 $OUT/tune.err
echo "== table"; cut -d, -f2-7 $OUT/qmm.csv | grep -v "^$" | paste -sd' ' | sed 's/linear,/\n/g' | head -60; echo
grep -E "^(default|notile|tile1|m2|m2d1)," $OUT/tune.csv
