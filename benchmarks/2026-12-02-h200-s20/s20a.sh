# s19e (prepared in session 19, not run: no device time left): (1) moe_act's grid from the experts' width
# (moeActBlocks: gpt-oss 45 blocks a tile, Qwen3 12; was 4): s19d's gpt-oss-20b 64-sequence profile had moe_act at
# 64 us a layer (1.5 of 22.8 ms). (2) attn_dtile with attention sinks (Tuning.DecTileSinks, the "dtilesinks" rows):
# s19d had attn_decode_64 at 5.5 of gpt-oss-20b's 22.8 ms at 64 sequences (its KV is ~1.7 GB a step, ~0.45 ms at the
# copy rate). Conformance (the new sinks cases of AttentionBatchDecode on both kernels), then the MoE batch steps.
# Predictions: everything passes; gpt-oss-20b default steps at 32 / 64 sequences 19.92 / 21.37 ms (s19c) -> ~19.3 /
# ~20.2 (moe_act); dtilesinks a further 2-4 ms at 64 (attention 5.5 -> ~1.5-2 ms), ~1-2 ms at 32; Qwen3-30B-A3B
# within 0.3 ms of s19c. If dtilesinks wins: DecTileSinks goes (the tile kernel takes sinks by default).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 120 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$/^(MoE|Attention)|TestConformanceVariants/^dtilesinks$/^Attention|TestMoE|TestDecodeTileSinks|TestModelsGPU$/gpt_oss' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL|^        --- FAIL" $OUT/t.log | head -8; echo "passes: $(grep -c -- '--- PASS' $OUT/t.log)"
grep -E "sinkstrue/step[12]" $OUT/t.log | head -8
MLXCEL_CUDA_BENCH=1 timeout 300 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuningMoE$' > $OUT/moeb.log 2>&1; echo "moe batch rc=$? $(el) s"
grep -E "^(tuning|qwen3|gpt-oss)" $OUT/moeb.log > $OUT/cuda_h200_batch_moe_s20a.csv; cat $OUT/cuda_h200_batch_moe_s20a.csv
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
