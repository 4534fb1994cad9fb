# s12r6 (issues 21, 26): attn_decode with the next round's K/V loaded before this round's math (the _p kernels,
# Tuning.DecPrefetch) against the kernels without: conformance under the variant, then decode steps of 1
# sequence (1k and 8k context), 64 and 128 sequences (1k), interleaved, on synthetic Llama-3.1-8B 4-bit weights.
set -u
for f in .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/prefetch|TestConformance$' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|> [0-9.e-]+$" $OUT/t.log | head -20; grep -c -- "--- PASS" $OUT/t.log
MLXCEL_CUDA_BENCH=1 timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuning' > $OUT/tune.log 2>&1; echo "tune rc=$?"
echo "== table"; grep -E "^tuning|^[a-z0-9]+,[0-9]+,[0-9]+," $OUT/tune.log; grep -E "FAIL|Error|error" $OUT/tune.log | head -3
