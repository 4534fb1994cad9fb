# next-s17b: the s16a tests again after the fix (sample_rows' parameters from fresh arena memory: arenaAllocFresh),
# then serving: Qwen3-30B-A3B c64 with the Qwen3 tokenizer (s16a used Llama 3.1's, whose 128256 ids leave Qwen's
# 151936-token vocabulary's top ids without text: the one "stream ended without content" per run), and Llama-3.1-8B
# c64 for memplan's larger activation estimate. qmm4_w128_s5/_s9 are gone (lost in s16a).
# Predictions: every test passes; Qwen3-30B-A3B c64 0 errors, ~3.6k tok/s (s16a 3687 measured run); Llama c64 ~6.9k
# tok/s as in s15c (same kernels), KV ~1.3 GB smaller.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 240 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestFreshArena|TestMoEScratch|TestEnginePrefixCache|TestModelsGPU|TestEngine|TestConformance$|TestConformanceVariants|TestSampleRows|TestEngineRowSampling' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL" $OUT/t.log | head -12; echo "passes: $(grep -c -- '--- PASS' $OUT/t.log)"
serve() { # profile ctx tokenizer
  .gpu/mlxcel serve --profile $1 --backend cuda --parallel 0 --ctx-size $2 --port 18080 --tokenizer .gpu/tokenizers/$3 > $OUT/serve_$1.log 2>&1 &
  spid=$!
  for _ in $(seq 1 120); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
  for r in w m; do timeout 50 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64 --requests 128 --prompt-tokens 512 \
    --max-tokens 256 --quiet --tokenizer .gpu/tokenizers/$3 --out $OUT/sv_$1_$r.csv > $OUT/sv_$1_$r.log 2>&1; echo "$1 c64 $r rc=$? $(el) s"; done
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
  kill $spid; wait $spid 2>/dev/null
  grep -m1 "KV cache" $OUT/serve_$1.log | cut -c1-220
}
serve qwen3-30b-a3b-4bit 4608 qwen3
serve llama-3.1-8b-4bit 4608 llama3_1
for f in $OUT/sv_*.csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/serve_s17b.csv; rm -f $OUT/sv_*.csv
echo "== serve"; grep -v '^concurrency' $OUT/serve_s17b.csv | cut -d, -f1-3,5,6,9,10,11,13
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
