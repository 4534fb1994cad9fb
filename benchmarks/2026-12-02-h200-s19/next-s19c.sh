# s19c: the final build of s19 (moe_qmma4 at two blocks an SM for every form, plan.MoEGEMMFrom's rule): the tests,
# the MoE batch steps (default, all grouped, all per-token), and serving synthetic Qwen3-30B-A3B at 64 streams
# (512-token prompts, 256-token answers; s17b: 3509 tok/s, ITL 17.8 ms).
# Predictions: every test passes; default = min(grouped, pertoken) within 2% at 8/16/24 (Qwen3: per-token at 8/16,
# grouped at 24; gpt-oss grouped from 8); Qwen3-30B c64 ~4.4-4.7k tok/s (the batch-64 step went 27.2 -> 20.4 ms).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestConformanceVariants/^moegrouped8$/MoE|TestModelsGPU|TestEngine|TestMoE|TestRecord' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL|^        --- FAIL" $OUT/t.log | head -12; echo "passes: $(grep -c -- '--- PASS' $OUT/t.log)"
MLXCEL_CUDA_BENCH=1 timeout 170 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuningMoE$' > $OUT/moeb.log 2>&1; echo "moe batch rc=$? $(el) s"
grep -E "^(tuning|qwen3|gpt-oss)" $OUT/moeb.log > $OUT/cuda_h200_batch_moe_s19c.csv
.gpu/mlxcel serve --profile qwen3-30b-a3b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 --tokenizer .gpu/tokenizers/qwen3 > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 120); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
for r in w m; do timeout 50 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64 --requests 128 --prompt-tokens 512 \
  --max-tokens 256 --quiet --tokenizer .gpu/tokenizers/qwen3 --out $OUT/sv_$r.csv > $OUT/sv_$r.log 2>&1; echo "qwen3 c64 $r rc=$? $(el) s"; done
kill $spid; wait $spid 2>/dev/null
for f in $OUT/sv_*.csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/cuda_h200_serve_s19c.csv; rm -f $OUT/sv_*.csv
echo "== moe steps"; cat $OUT/cuda_h200_batch_moe_s19c.csv
echo "== serve"; grep -v '^concurrency' $OUT/cuda_h200_serve_s19c.csv | cut -d, -f1-3,5,6,9,10,11,13
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
