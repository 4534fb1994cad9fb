# s13r5 (issue 25): FP-quant weights on CUDA (mxfp4 / nvfp4 / mxfp8, s13-fpq merged; Supports declares them),
# gpt-oss mxfp4 fixtures, and Qwen3.5 after keeping narrow products (<= 64 outputs: Gated DeltaNet's a/b,
# shared-expert gates) in f32 at every row count. s13r4: Qwen3.5 full-sequence logits 0.035 / 0.030 (dense
# bf16 / q4) and 0.151 / 0.308 (MoE) against the 0.02 bound, incremental 6e-5..4e-3: prediction, the dense
# ones pass if a/b's bf16 rounding through the decay was the amplifier; the MoE ones may still part on router
# near-ties. HF transformers' own bf16 forward on the same card, against the same references, as the floor.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
timeout 300 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestModelsGPU|TestEngine|TestMoEDecode$|TestMoEPrefill$|TestGraphReplay|TestFeatures' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|^        --- FAIL" $OUT/t.log | head -30; grep -c -- "--- PASS" $OUT/t.log
grep -E "(LinearFP|EmbedFP|MoEFP|MoEGptOss).*(error|bound)" $OUT/t.log | sort -t' ' -k5 -g | tail -4
grep -E "model_gpu_test.go:[0-9]+: .*(gpt_oss|qwen3_5)" $OUT/t.log | head -16
timeout 120 python3 benchmarks/2026-12-02-h200-s13/hf_bf16_ref.py .gpu/testdata tiny/qwen3_5_text-bf16 tiny/qwen3_5_moe_text-bf16 tiny/llama-bf16 tiny/qwen3_moe-bf16 tiny/gpt_oss-bf16 2>$OUT/hf.err | tee $OUT/hf_bf16_ref.csv
tail -3 $OUT/hf.err
MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_DECODE=0 MLXCEL_BENCH_PREFILL=0 timeout 100 .gpu/cuda.test -test.count=1 -test.run 'TestBench$' > $OUT/bench.log 2>&1; echo "bench rc=$?"; grep -iE "fp4|fp8|copy_f32x4" $OUT/bench.log | head -12
cd $OUT && tar czf logs.tgz *.log *.err && rm -f *.log *.err
