# s15b: main after merging s15-asyncsample (sampled/constrained run-ahead) and s15-deltachunk (chunked Gated
# DeltaNet prefill), with qmm4's warpgroup forms reading x through TMA (qmm4_w64/w128) and the cp.async variants
# kept for the A/B (w64c: cp.async + fence.proxy.async, as s15a's w64; w64n: without the fence).
# Predictions: s15a's w64 ran ~2 us a slab whatever the rows (4096x4096 at 64 rows 28.9 us against qmm4's 19.3):
# the proxy fence waits for the thread's outstanding cp.async, so one slab was in flight. Then w64n ~2-3x faster
# than w64c and TMA w64 about as fast as w64n: 14336x4096 at 64 rows ~15-20 us (qmm4 46.5), batch-64 step
# 9.5 -> ~5 ms, serving c64 ~10-12k tok/s. If w64n is as slow as w64c the fence is not the cause (then the x
# cp.async bank conflicts or the per-slab barrier). Helpers' predictions in notes/cuda-session-15.md.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 280 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestKernel|TestLaunch' > $OUT/t.log 2>&1; echo "conformance rc=$? $(el) s"
grep -E "compile .*cache hit" $OUT/t.log | head -1 | sed 's/.*(compile/(compile/'
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL" $OUT/t.log | head -12
MLXCEL_CUDA_BENCH=1 timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchQMM$' > $OUT/qmm.log 2>&1; echo "qmm bench rc=$? $(el) s"
echo "== qmm (us, GB/s, of copy)"; grep -E "^linear," $OUT/qmm.log | grep -E ",(64|128)," | cut -d, -f2-7
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/(qmm_w128|noqmmw)/Linear|TestConformanceVariants/(nochunk|chunk1)/GatedDeltaNet|TestModelsGPU|TestEngine|TestSampleRowsGPU|TestDeltaChunkGPU' > $OUT/t2.log 2>&1; echo "variants/models/engine rc=$? $(el) s"
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL|^        --- FAIL" $OUT/t2.log | head -16
MLXCEL_CUDA_BENCH=1 timeout 100 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuning|TestBenchDeltaNet$' > $OUT/batch.log 2>&1; echo "batch/deltanet bench rc=$? $(el) s"
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 90); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
SC=benchmarks/2026-12-02-h200-s13/ints_schema.json
for run in c64w:64:plain c64:64:plain s64:64:schema t64:64:sampled c128:128:plain s64b:64:schema c64b:64:plain; do
  IFS=: read name c mode <<< "$run"; fmt=""
  [ "$mode" = schema ] && fmt="--response-format @$SC"; [ "$mode" = sampled ] && fmt="--temperature 0.8 --top-p 0.95"
  timeout 45 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency $c --requests $((c*2)) --prompt-tokens 512 --max-tokens 256 \
    --ignore-eos=false $fmt --quiet $TOK --out $OUT/sv_$name.csv > $OUT/sv_$name.log 2>&1; echo "serve $name rc=$? $(el) s"
done
curl -s http://127.0.0.1:18080/metrics | grep -E "^mlxcel_engine_run_ahead" > $OUT/metrics_runahead.log
kill $spid; wait $spid 2>/dev/null
for f in $OUT/sv_*.csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/serve_s15b.csv; rm -f $OUT/sv_*.csv
left=$(( 540 - $(el) ))
[ $left -gt 50 ] && timeout $left .gpu/mlxcel bench ladder --backend cuda --profiles qwen3.5-35b-a3b-4bit --lengths 512,8192 --max-tokens 32 $TOK --out $OUT > $OUT/ladder.log 2>&1; echo "ladder rc=$? $(el) s"
echo "== batch"; grep -E "^[a-z0-9]+,[0-9]+,1024," $OUT/batch.log
echo "== deltanet"; grep -iE "chunk|recurrent" $OUT/batch.log | grep -E "us|ms" | head -10
echo "== serve"; grep -v '^concurrency' $OUT/serve_s15b.csv | cut -d, -f1-3,5,6,9,10,11,13; cat $OUT/metrics_runahead.log
echo "== ladder"; grep -E "^ +[a-z].*(ok|skip)" $OUT/ladder.log | head -4
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
