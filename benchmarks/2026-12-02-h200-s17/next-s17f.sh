# (prepared; not run: the session's device time ran out)
# next-s17f: s17e's tests passed, but serving gave no hits: bench serve's prompts share their first 4096 tokens and
# differ after, and snapshots were taken only at each prompt's last block boundary (4592), which no other prompt
# reaches. Now a prompt whose cached blocks end without a snapshot stops its prefill there (the branch point) and
# leaves one. Same workload as s17e with the cache on (s17e without it: TTFT mean 2594 ms, p50 1255).
# Prediction: prefix-cache hit tokens ~30 x 4096 of 147k queried; TTFT mean 2-4x lower than s17e's no-cache run.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestSlotSnapshot|TestEnginePrefixCache' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
grep -E "^(--- FAIL|--- PASS|FAIL|ok|panic)|^    --- FAIL" $OUT/t.log | head -8
.gpu/mlxcel serve --profile qwen3.5-35b-a3b-4bit --backend cuda --parallel 0 --ctx-size 8192 --port 18080 --tokenizer .gpu/tokenizers/qwen3 > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 150); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
timeout 90 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 16 --requests 32 --prompt-tokens 4608 --shared-prefix-tokens 4096 \
  --max-tokens 64 --metrics --tokenizer .gpu/tokenizers/qwen3 --out $OUT/serve_s17f.csv > $OUT/sv.log 2>&1; echo "cache rc=$? $(el) s"
kill $spid; wait $spid 2>/dev/null
grep -i "prefix\|cached\|prefill_tokens" $OUT/sv.log | head -5
echo "== serve"; grep -v '^concurrency' $OUT/serve_s17f.csv | cut -d, -f1-3,5,6,9,10,13
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
