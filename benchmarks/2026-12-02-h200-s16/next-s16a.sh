# next-s16a (prepared in session 16, which had no device time; not run yet). Checks this session's CPU-written changes
# on the GPU, then the serving run that ran out of memory in s15d/e.
# 1. Tests: TestMoEScratchReusedAcrossLayers (host), TestEnginePrefixCacheWindowedGPU (new: Gemma 4 / gpt-oss prefix
#    caching on CUDA, no rings), the model and engine tests.
# 2. Qwen3-30B-A3B `serve --parallel 0` at 64 streams (s15d/e: every request failed in cuMemAlloc of an arena chunk;
#    the arena held every layer's MoE scratch, ~1 GB a layer at 8k-token steps, until the step ended).
# 3. (Llama-3.1-8B at 64 streams, for memplan's larger activation estimate, +~1.3 GB of 108 GiB: left to a later call.)
# 4. TestBenchQMM with the pipeline-depth candidates qmm4_w128_s5 (ring of 5 slabs, 3 in flight, 2 blocks an SM) and
#    qmm4_w128_s9 (9 slabs, 7 in flight, 1 block an SM) beside qmm4_w128 (4 slabs, 2 in flight).
# Predictions: tests pass (the candidates' conformance too); Qwen3-30B-A3B c64 0 errors, ~3-3.5k tok/s (MoE batched
# decode, s13: 27 ms a 64-step), its KV note ~1.7 GB more kept for activations;
# if the flat time is copy latency, at 128 rows on 14336x4096 s5 ~40 us and s9 ~32-36 us against w128's 53, and at 64
# rows s9 within 10% of qmm4 (4096x4096: 19.3 us); if they do not move, the latency is elsewhere (next-s16b's ncu).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 220 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestMoEScratch|TestEnginePrefixCache|TestModelsGPU|TestEngine|TestConformance$|TestConformanceVariants/qmm_w128' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL" $OUT/t.log | head -12; echo "passes: $(grep -c -- '--- PASS' $OUT/t.log)"
serve() { # profile ctx
  .gpu/mlxcel serve --profile $1 --backend cuda --parallel 0 --ctx-size $2 --port 18080 $TOK > $OUT/serve_$1.log 2>&1 &
  spid=$!
  for _ in $(seq 1 120); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
  for r in w m; do timeout 50 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64 --requests 128 --prompt-tokens 512 \
    --max-tokens 256 --quiet $TOK --out $OUT/sv_$1_$r.csv > $OUT/sv_$1_$r.log 2>&1; echo "$1 c64 $r rc=$? $(el) s"; done
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
  kill $spid; wait $spid 2>/dev/null
  grep -m1 "KV cache" $OUT/serve_$1.log | cut -c1-220
}
MLXCEL_CUDA_BENCH=1 timeout 90 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchQMM$' > $OUT/qmm.log 2>&1; echo "qmm bench rc=$? $(el) s"
serve qwen3-30b-a3b-4bit 4608
for f in $OUT/sv_*.csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/serve_s16a.csv; rm -f $OUT/sv_*.csv
echo "== qmm (us, GB/s, of copy)"; grep -E "^linear," $OUT/qmm.log | grep -E ",(64|128)," | grep -E "w128|wide|m2d1" | cut -d, -f2-7
echo "== serve"; grep -v '^concurrency' $OUT/serve_s16a.csv | cut -d, -f1-3,5,6,9,10,11,13
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
