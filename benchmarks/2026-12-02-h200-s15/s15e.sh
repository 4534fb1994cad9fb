# s15e: the fix for s15d's out-of-memory (Qwen3-30B-A3B serving at 64 streams: every request failed in cuMemAlloc of an
# arena chunk, the pool of per-size tensor buffers having filled the 14 GB outside the KV cache). Tests, then the
# serving run again. Predictions: tests pass; 0 errors; ~3-3.5k output tok/s (MoE batched decode, s13: 27 ms a 64-step).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 100 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestModelsGPU|TestEngine|TestTensorClass|TestFreeKVStoreGPU' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL" $OUT/t.log | head -12; echo "passes: $(grep -c -- '--- PASS' $OUT/t.log)"
.gpu/mlxcel serve --profile qwen3-30b-a3b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve_moe.log 2>&1 &
spid=$!
for _ in $(seq 1 120); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
for r in w m; do timeout 50 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64 --requests 128 --prompt-tokens 512 --max-tokens 256 \
  --quiet $TOK --out $OUT/sv_moe64$r.csv > $OUT/sv_moe64$r.log 2>&1; echo "moe c64 $r rc=$? $(el) s"; done
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
kill $spid; wait $spid 2>/dev/null
for f in $OUT/sv_*.csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/serve_s15e.csv; rm -f $OUT/sv_*.csv
echo "== serve"; grep -v '^concurrency' $OUT/serve_s15e.csv | cut -d, -f1-3,5,6,9,10,11,13; grep -m3 "error" $OUT/sv_moe64*.log
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
