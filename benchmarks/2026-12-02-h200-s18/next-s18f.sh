# next-s18f: the final build of the session (qmma4 K-split at 2-32 rows, bf16 scales): tests, the batch ladder, and
# serving Llama-3.1-8B at 8, 16 and 32 streams (issue 21's workload: 512-token prompts, 256-token answers,
# ignore_eos; s15c: 2341 output tok/s at 16, s17b 7258 at 64).
# Predictions: every test passes; batch steps 8 / 16 / 24 / 32 ~4.86 / 6.34 / 9.35 / 10.7 ms; serving at 16 streams
# 2700-3000 tok/s (the batch-16 step 6.34 against 7.04 ms, plus attention and sampling), at 32 ~3000.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestModelsGPU|TestEngineBatchInvarianceGPU|TestEngineRunAheadGPU|TestEngineRowSampling' > $OUT/t.log 2>&1
echo "tests rc=$? $(el) s"; grep -E "^    --- FAIL|^--- |^(FAIL|ok|panic)|CUDA_ERROR" $OUT/t.log | head -10
MLXCEL_CUDA_BENCH=1 timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuning$' > $OUT/batch.log 2>&1; echo "batch steps rc=$? $(el) s"
grep -E "^(tuning|default|notile|qmm17|w128|noqmmw)," $OUT/batch.log > $OUT/cuda_h200_batch_s18f.csv
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 2048 --port 18080 --tokenizer .gpu/tokenizers/llama3_1 > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 150); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
timeout 150 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 8,16,32 --requests 64 --prompt-tokens 512 --max-tokens 256 \
  --ignore-eos --tokenizer .gpu/tokenizers/llama3_1 --metrics --out $OUT/cuda_h200_serve_s18f.csv > $OUT/sv.log 2>&1; echo "serve rc=$? $(el) s"
kill $spid; wait $spid 2>/dev/null
echo "== batch steps"; cat $OUT/cuda_h200_batch_s18f.csv
echo "== serve (conc, reqs, errors, ttft mean, p50, itl mean, p99, out tok/s)"; cut -d, -f1-3,5,6,9,10,13 $OUT/cuda_h200_serve_s18f.csv
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
