# s14b: the rest of s14a's tests (s14a's first test run spent its 330 s on the conformance variants, all
# passing), then the branches' speed: Llama-3.1-8B 4-bit decode after 8192/32768 prompt tokens and the batch-64
# step at 1024 keys with the f16 and the fp8 KV cache; the MoE rows path against the path before
# (TestBenchMoERows, interleaved) and the Qwen3-30B-A3B batch ladder. Synthetic weights.
# Predictions: tests pass; fp8 decode after 32768 240 -> ~300 tok/s (attn_dtile at one sequence reads half the
# K/V bytes), batch 64 9.5 -> ~8.5 ms; Qwen3-30B-A3B 64-sequence step 26.9 -> ~15 ms; batch 1 unchanged.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
S=$(date +%s)
timeout 220 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestKernel|TestLaunch|TestKV|TestConformanceKVFP8|TestMoEPrefill$|TestMoERowsRepeat$|TestMoEDecode$|TestRecordMoERows|TestSample|TestFreeKVStoreGPU' > $OUT/t3.log 2>&1; echo "t3 rc=$? $(( $(date +%s)-S )) s"
for dt in auto fp8; do
  timeout 75 .gpu/mlxcel bench decode --profile llama-3.1-8b-4bit --backend cuda --prompt-tokens 8192,32768 --max-tokens 128 --kv-cache-dtype $dt $TOK --csv $OUT/long_$dt.csv > $OUT/long_$dt.log 2>&1; echo "long $dt rc=$? $(( $(date +%s)-S )) s"
  timeout 40 .gpu/mlxcel bench decode --profile llama-3.1-8b-4bit --backend cuda --batch 1,64 --context 1024 --steps 16 --kv-cache-dtype $dt $TOK --csv $OUT/batch_$dt.csv > $OUT/batch_$dt.log 2>&1; echo "batch $dt rc=$? $(( $(date +%s)-S )) s"
done
MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_CSV=$OUT/moe_rows.csv timeout 80 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchMoERows$' > $OUT/bench.log 2>&1; echo "moe bench rc=$? $(( $(date +%s)-S )) s"
timeout 60 .gpu/mlxcel bench decode --profile qwen3-30b-a3b-4bit --backend cuda --batch 1,32,64,128 --context 1024 --steps 16 $TOK --csv $OUT/batch_qwen3moe.csv > $OUT/bm.log 2>&1; echo "moe batch rc=$? $(( $(date +%s)-S )) s"
echo "== t3"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|^    --- FAIL|^        --- FAIL" $OUT/t3.log | head -30; echo "passes: $(grep -c -- '--- PASS' $OUT/t3.log)"
grep -E "sample_rows|us a row|ms for" $OUT/t3.log | head -8
echo "== bench moe rows"; grep -E "us per layer|difference" $OUT/bench.log | head -20
echo "== table"; for f in long_auto long_fp8 batch_auto batch_fp8 batch_qwen3moe; do echo "-- $f"; [ -f $OUT/$f.csv ] && cut -d, -f1-12 $OUT/$f.csv | head -8; done
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
