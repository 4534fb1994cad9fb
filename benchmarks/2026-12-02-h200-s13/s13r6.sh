# s13r6 (issues 25, 21): the Qwen3.5 fixtures with their measured one-step bound and the greedy prompt fed 32
# tokens a step (s13r5: full 0.042/0.030/0.185/0.243, HF bf16 0.024/0.155); the whole GPU suite once more; and
# qmm4 from 17 rows (bf16 x) against qmma4 (f16 x) for 17-32 rows: s13r4's ladder had 32 rows at 11.45 ms,
# slower than 64 at 9.46 (prediction: 32 rows ~9 ms with qmm4; the conformance variant shows whether the MoE
# DecodeLayer case still parts at 30 rows, as the 32-row tile did in s12r4).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
timeout 240 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestConformanceVariants/qmm17/(DecodeLayer|Linear|Sequences|MoE)|TestModelsGPU|TestEngine|TestMoEDecode$|TestMoEPrefill$|TestGraphReplay' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|^        --- FAIL|> [0-9.e-]+ \(bound" $OUT/t.log | head -30; grep -c -- "--- PASS" $OUT/t.log
grep -E "model_gpu_test.go:[0-9]+: .*qwen3_5" $OUT/t.log | head -8
grep -E "qmm17/DecodeLayer.*moe=true" $OUT/t.log | sort -k5 -g | tail -3
MLXCEL_CUDA_BENCH=1 timeout 150 .gpu/cuda.test -test.count=1 -test.run 'TestBenchBatchDecodeTuning$' > $OUT/tune.csv 2> $OUT/tune.err; echo "tune rc=$?"; tail -2 $OUT/tune.err
echo "== table"; grep -E "^(default|notile|qmm17|wide)," $OUT/tune.csv
cd $OUT && tar czf logs.tgz *.log *.err && rm -f *.log *.err
