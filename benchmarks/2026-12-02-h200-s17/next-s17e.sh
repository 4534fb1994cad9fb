# next-s17e: next-s17d again. In s17d every SaveSlot panicked ("inside a step": the CUDA backend's inStep never goes false after the
# first step, so the check was wrong) and the engine dropped the snapshots silently: 0 hits. The check is gone; Stats counts
# SnapshotsSaved and SnapshotFailures, and the GPU test asserts no failures. Same predictions as s17d.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestSlotSnapshot|TestFreshArena|TestEnginePrefixCache|TestModelsGPU|TestModelHybrid|TestEngine|TestKernel' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL" $OUT/t.log | head -12; echo "passes: $(grep -c -- '--- PASS' $OUT/t.log)"
grep -E "^    --- (PASS|FAIL).*PrefixCache" $OUT/t.log
serve() { # name flags...
  n=$1; shift
  .gpu/mlxcel serve --profile qwen3.5-35b-a3b-4bit --backend cuda --parallel 0 --ctx-size 8192 --port 18080 --tokenizer .gpu/tokenizers/qwen3 "$@" > $OUT/serve_$n.log 2>&1 &
  spid=$!
  for _ in $(seq 1 150); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
  timeout 90 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 16 --requests 32 --prompt-tokens 4608 --shared-prefix-tokens 4096 \
    --max-tokens 64 --metrics --tokenizer .gpu/tokenizers/qwen3 --out $OUT/sv_$n.csv > $OUT/sv_$n.log 2>&1; echo "$n rc=$? $(el) s"
  kill $spid; wait $spid 2>/dev/null
  grep -m1 "KV cache" $OUT/serve_$n.log | cut -c1-240; grep -m1 -i "prefix cach" $OUT/serve_$n.log | cut -c1-200
  grep -i "prefix\|cached" $OUT/sv_$n.log | head -4
}
serve cache
serve nocache --no-prefix-cache
for f in $OUT/sv_*.csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/serve_s17e.csv; rm -f $OUT/sv_*.csv
echo "== serve"; grep -v '^concurrency' $OUT/serve_s17e.csv | cut -d, -f1-3,5,6,9,10,13
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
