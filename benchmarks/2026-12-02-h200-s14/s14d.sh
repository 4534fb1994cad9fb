# s14d: the session's last call, on branch s14-int (main + s14-moefp4 + s14-gptossdec + s14-dtile256 + constrained
# rows sampled on the device). Tests first (the merge gate), then the helpers' in-process A/Bs, then issue 22's
# constrained serving at 64 streams (plain vs json_schema, interleaved), then ladder rows. Synthetic weights.
# Predictions: tests pass (TestSampleRowsGPU too, its helper fixed); TestWideDecodeBench: head dim 256 one sequence
# at 32768 keys several times faster than the generic kernel; TestBenchMoEPrefillFP grouped ~3x moeGrouped;
# TestBenchMoEDecodeGptOss _x path ~2x; constrained ITL within ~10% of plain; ladder: qwen3.5-35b-a3b decode after
# 32768 ~250-280 tok/s (83), gpt-oss-20b decode ~360 (295), prefill ~2.5k (1.1k).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 240 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestSampleRowsGPU|TestEngineRowSampling|TestModelsGPU|TestMoEDecodeGptOss$|TestRecordGptOss|TestRecordMoEPrefillFP|TestLaunch|TestKernel' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
MLXCEL_CUDA_BENCH=1 timeout 75 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestWideDecodeBench|TestBenchMoEPrefillFP|TestBenchMoEDecodeGptOss' > $OUT/bench.log 2>&1; echo "bench rc=$? $(el) s"
SC=benchmarks/2026-12-02-h200-s13/ints_schema.json
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 90); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
for r in 0 1 2; do for mode in plain schema; do
  [ $r = 0 ] && [ $mode = schema ] && continue
  fmt=""; [ $mode = schema ] && fmt="--response-format @$SC"
  timeout 40 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64 --requests 128 --prompt-tokens 512 --max-tokens 256 \
    --ignore-eos=false $fmt --quiet $TOK --out $OUT/sv_${mode}_$r.csv > $OUT/sv_${mode}_$r.log 2>&1; echo "$mode $r rc=$? $(el) s"
done; done
kill $spid; wait $spid 2>/dev/null
for f in $OUT/sv_*_[12].csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/serve_schema.csv; rm -f $OUT/sv_*.csv
left=$(( 455 - $(el) ))
[ $left -gt 40 ] && timeout $left .gpu/mlxcel bench ladder --backend cuda --profiles qwen3.5-35b-a3b-4bit,gpt-oss-20b-mxfp4-q8,gemma-4-26b-a4b-it-4bit \
  --lengths 512,32768 --max-tokens 64 $TOK --out $OUT > $OUT/ladder.log 2>&1; echo "ladder rc=$? $(el) s"
echo "== tests"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|^    --- FAIL|^        --- FAIL" $OUT/t.log | head -30; echo "passes: $(grep -c -- '--- PASS' $OUT/t.log)"
grep -E "sampled draws|graphs:" $OUT/t.log | head -8
echo "== bench"; grep -E "us |ms |difference|x faster|per layer" $OUT/bench.log | head -40
echo "== serve"; grep -v '^concurrency' $OUT/serve_schema.csv | cut -d, -f1-3,5,6,9,10,11,13
echo "== ladder"; grep -E "^ +[a-z].*(ok|skip)" $OUT/ladder.log | head -10
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
