# s15d: the session's last call, on main after the cleanup (qmm4_w128 only). Tests (the gate), then where a gpt-oss-20b
# decode step goes (issue 25: 426 tok/s, 0.96x Llama), Qwen3-30B-A3B serving at 64 streams (issue 21: >= 8000), and
# 4096-token prompts at 16 streams (issue 21: ITL p99 <= 80 ms, >= 700 tok/s).
# Predictions: tests pass; gpt-oss step ~2.3 ms: MoE ~1.4 ms (24 x 60 us), attention ~0.3 ms, q8 projections ~0.3,
# head ~0.15; Qwen3-30B-A3B c64 ~3-3.5k tok/s (MoE batched decode 27 ms a 64-step, s13); 4096 c16 ITL p99 ~80-90 ms.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestKernel|TestLaunch|TestModelsGPU|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
grep -E "compile .*cache hit" $OUT/t.log | head -1 | sed 's/.*(compile/(compile/' | cut -c1-60
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL" $OUT/t.log | head -12; echo "passes: $(grep -c -- '--- PASS' $OUT/t.log)"
MLXCEL_CUDA_PROFILE=40 timeout 70 .gpu/mlxcel bench decode --profile gpt-oss-20b-mxfp4-q8 --backend cuda --max-tokens 64 $TOK > $OUT/gptoss_prof.log 2>&1; echo "gpt-oss profile rc=$? $(el) s"
.gpu/mlxcel serve --profile qwen3-30b-a3b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve_moe.log 2>&1 &
spid=$!
for _ in $(seq 1 120); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
for r in w m; do timeout 45 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64 --requests 128 --prompt-tokens 512 --max-tokens 256 \
  --quiet $TOK --out $OUT/sv_moe64$r.csv > $OUT/sv_moe64$r.log 2>&1; echo "moe c64 $r rc=$? $(el) s"; done
kill $spid; wait $spid 2>/dev/null
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 8192 --port 18080 $TOK > $OUT/serve_long.log 2>&1 &
spid=$!
for _ in $(seq 1 90); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
for r in w m; do timeout 60 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 16 --requests 32 --prompt-tokens 4096 --max-tokens 128 \
  --quiet $TOK --out $OUT/sv_long16$r.csv > $OUT/sv_long16$r.log 2>&1; echo "4096 c16 $r rc=$? $(el) s"; done
kill $spid; wait $spid 2>/dev/null
for f in $OUT/sv_*.csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/serve_s15d.csv; rm -f $OUT/sv_*.csv
echo "== gpt-oss profile"; grep -vE "^\s*$" $OUT/gptoss_prof.log | grep -iE "us|ms|tok/s|%" | head -40
echo "== serve"; grep -v '^concurrency' $OUT/serve_s15d.csv | cut -d, -f1-3,5,6,9,10,11,13
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
