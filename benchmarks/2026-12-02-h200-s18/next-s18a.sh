# next-s18a (prepared in session 17 when its device time ran out; not run yet): serving.
# 1. Tests: TestSlotSnapshot, TestEnginePrefixCache (Qwen3.5 fixtures on the CUDA slot snapshots).
# 2. Qwen3.5-35B-A3B (synthetic), 16 streams, 32 prompts of 4608 tokens sharing the first 4096, 64 generated
#    (s17e's workload): prefix cache with branch-point snapshots (kvcache.BranchPoint), then the same with
#    --itl-target 100ms. s17e: 0 hit tokens, TTFT mean 2906 ms (2594 without the cache), ITL mean 134 ms, p99 838.
# 3. Llama-3.1-8B (synthetic) issue 21's long-prompt measure: 4096-token prompts, 128 generated, 16 streams, with
#    --itl-target 0 and 60ms (s13: 639 tok/s, ITL p99 84 ms; goal p99 <= 80 ms and >= 700 tok/s).
# 4. Qwen3.5-35B-A3B three-turn conversations (bench serve --turns 3, 2048-token first prompts, 128-token follow-ups):
#    the follow-ups restore the snapshot at the previous prompt's end.
# Predictions: hit tokens ~31 x 4096 (~127k of 147k), TTFT mean 2-4x lower than 2906; with --itl-target 100ms ITL
# p99 < 300 ms and TTFT mean up by < 50%; Llama at 60ms ITL p99 <= 80 ms, throughput within 10% of the 0 run;
# follow-up TTFT < 1/3 of first-turn TTFT (they compute the last answer and the new message, ~200 tokens).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestSlotSnapshot|TestEnginePrefixCache' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
grep -E "^(--- FAIL|--- PASS|FAIL|ok|panic)|^    --- FAIL" $OUT/t.log | head -8
run() { # name profile tokenizer prompt shared max conc reqs timeout serve-flags...
  n=$1 prof=$2 tk=$3 pt=$4 sh=$5 mt=$6 c=$7 rq=$8 to=$9; shift 9
  .gpu/mlxcel serve --profile $prof --backend cuda --parallel 0 --ctx-size 8192 --port 18080 --tokenizer .gpu/tokenizers/$tk "$@" > $OUT/serve_$n.log 2>&1 &
  spid=$!
  for _ in $(seq 1 150); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
  timeout $to .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency $c --requests $rq --prompt-tokens $pt --shared-prefix-tokens $sh \
    --max-tokens $mt --metrics --tokenizer .gpu/tokenizers/$tk ${BX:-} --out $OUT/sv_$n.csv > $OUT/sv_$n.log 2>&1; echo "$n rc=$? $(el) s"
  kill $spid; wait $spid 2>/dev/null
  grep -E "prefix_cache_(hit|query|snapshots)" $OUT/sv_$n.log | head -3
}
run qwen35_cache qwen3.5-35b-a3b-4bit qwen3 4608 4096 64 16 32 90
run qwen35_cache_itl100 qwen3.5-35b-a3b-4bit qwen3 4608 4096 64 16 32 90 --itl-target 100ms
BX="--turns 3 --turn-tokens 128" run qwen35_turns qwen3.5-35b-a3b-4bit qwen3 2048 0 64 16 16 90
run llama_long_itl0 llama-3.1-8b-4bit llama3_1 4096 0 128 16 48 60
run llama_long_itl60 llama-3.1-8b-4bit llama3_1 4096 0 128 16 48 60 --itl-target 60ms
for f in $OUT/sv_*.csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/serve_s18a.csv; rm -f $OUT/sv_*.csv
echo "== serve (conc, reqs, errors, ttft mean, p50, itl mean, p99, out tok/s)"; grep -v '^concurrency' $OUT/serve_s18a.csv | cut -d, -f1-3,5,6,9,10,13,17-19
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
