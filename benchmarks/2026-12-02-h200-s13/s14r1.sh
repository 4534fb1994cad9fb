# NOT RUN (session 13's device time went to s13r1-r7): the first call for the next session.
# s14r1 (issues 25, 21): FreeKVStore on the device, then the new families' rows of the long-prompt ladder
# (synthetic weights) beside Llama-3.1-8B and Qwen3-30B-A3B in the same call, for issue 25's figures:
# gpt-oss-20b batch-1 decode >= 1.3x Llama's; a Qwen3.5 model's decode after 32k >= 0.7x after 512, and its
# prefill at 8192 >= 0.6x a dense model of the same active size. Predictions: gpt-oss-20b decode ~1.1x
# Llama (the seven-launch MoE path with biases, s13-gptoss notes); Qwen3.5 decode ratio ~0.8 (the delta-rule
# layers' state is constant; attention on attn_dtile); Qwen3.5 prefill well under 0.6x (the sequential scan:
# ~0.9 us a position a layer, TestBenchDeltaNet s13r4).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestFreeKVStoreGPU|TestConformance$|TestModelsGPU|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|kvfree_gpu_test" $OUT/t.log | head -20
timeout 380 .gpu/mlxcel bench ladder --backend cuda --profiles llama-3.1-8b-4bit,gpt-oss-20b-mxfp4-q8,qwen3.5-35b-a3b-4bit,qwen3.5-27b-4bit,gemma-4-26b-a4b-it-4bit,gemma-4-e4b-it-4bit \
  --lengths 512,8192,32768 --max-tokens 64 --out $OUT > $OUT/ladder.log 2>&1; echo "ladder rc=$?"
ls $OUT; tail -30 $OUT/ladder.log
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
