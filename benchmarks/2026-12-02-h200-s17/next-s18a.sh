# next-s18a (prepared in session 17 when its device time ran out; not run yet).
# 1. Tests: TestSlotSnapshot, TestEnginePrefixCache (Qwen3.5 fixtures on the CUDA slot snapshots).
# 2. Qwen3.5-35B-A3B (synthetic), 16 streams, 32 prompts of 4608 tokens sharing the first 4096, 64 generated
#    (s17e's workload): prefix cache with branch-point snapshots (kvcache.BranchPoint), then the same with
#    --itl-target 100ms. s17e: 0 hit tokens, TTFT mean 2906 ms (2594 without the cache), ITL mean 134 ms, p99 838.
# 3. Llama-3.1-8B (synthetic) issue 21's long-prompt measure: 4096-token prompts, 128 generated, 16 streams, with
#    --itl-target 0 and 60ms interleaved (s13: 639 tok/s, ITL p99 84 ms; goal p99 <= 80 ms and >= 700 tok/s).
# 4. TestBenchReadPattern: the 4096x14336 4-bit matrix read with no math in the GEMV's order and in qmm4_w128's
#    (32 bytes of each of 128 rows a step, 1-8 steps in flight; 128 and 512 bytes a step; the 32-byte steps from
#    tiles repacked contiguous, rp_tile32); then the real products on such a copy: qmm4_w128_t, qmm4_bf_64_t and
#    qmm4_bf_64_m2d1_t (conformance first, then TestBenchQMM beside the row-layout kernels).
# Predictions: hit tokens ~31 x 4096 (~127k of 147k), TTFT mean 2-4x lower than 2906; with --itl-target 100ms ITL
# p99 < 300 ms and TTFT mean up by < 50%; Llama at 60ms ITL p99 <= 80 ms, throughput within 10% of the 0 run.
# Read patterns, if the layout is the limit: rows >= 0.7 of the copy rate, slab32 <= 0.25 at every depth, slab128
# ~0.5, slab512 and rp_tile32 near rows; if depth lifts slab32 to rows, the many-row kernels are latency-bound instead.
# qmm4_w128_t, if the layout is the limit: at 128 rows 4096x14336 <= 40 us (qmm4_w128 68.7 in s16a), 14336x4096
# <= 35 (53.7), 4096x4096 <= 20 (30.6); at 64 rows qmm4_bf_64_t on 14336x4096 <= 30 us (qmm_wide 45.8) and
# 4096x14336 <= 35 (m2d1 49.0); if they do not move, the limit is in the kernels (next-s16b's ncu).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestSlotSnapshot|TestEnginePrefixCache' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
grep -E "^(--- FAIL|--- PASS|FAIL|ok|panic)|^    --- FAIL" $OUT/t.log | head -8
timeout 120 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/^qmm_(w128t|widet|m2d1t)$' > $OUT/tq.log 2>&1; echo "tiled conformance rc=$? $(el) s"
grep -E "^    --- (FAIL|PASS|SKIP)|^(FAIL|ok|panic)" $OUT/tq.log | head -8
run() { # name profile tokenizer prompt shared max conc reqs timeout serve-flags...
  n=$1 prof=$2 tk=$3 pt=$4 sh=$5 mt=$6 c=$7 rq=$8 to=$9; shift 9
  .gpu/mlxcel serve --profile $prof --backend cuda --parallel 0 --ctx-size 8192 --port 18080 --tokenizer .gpu/tokenizers/$tk "$@" > $OUT/serve_$n.log 2>&1 &
  spid=$!
  for _ in $(seq 1 150); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
  timeout $to .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency $c --requests $rq --prompt-tokens $pt --shared-prefix-tokens $sh \
    --max-tokens $mt --metrics --tokenizer .gpu/tokenizers/$tk --out $OUT/sv_$n.csv > $OUT/sv_$n.log 2>&1; echo "$n rc=$? $(el) s"
  kill $spid; wait $spid 2>/dev/null
  grep -E "prefix_cache_(hit|query)" $OUT/sv_$n.log | head -2
}
run qwen35_cache qwen3.5-35b-a3b-4bit qwen3 4608 4096 64 16 32 90
run qwen35_cache_itl100 qwen3.5-35b-a3b-4bit qwen3 4608 4096 64 16 32 90 --itl-target 100ms
run llama_long_itl0 llama-3.1-8b-4bit llama3_1 4096 0 128 16 48 60
run llama_long_itl60 llama-3.1-8b-4bit llama3_1 4096 0 128 16 48 60 --itl-target 60ms
MLXCEL_CUDA_BENCH=1 timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchReadPattern$' > $OUT/rp.log 2>&1; echo "read patterns rc=$? $(el) s"
grep -E "^(bench|copy|readpattern)," $OUT/rp.log > $OUT/readpattern_s18a.csv
MLXCEL_CUDA_BENCH=1 timeout 90 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchQMM$' > $OUT/qmm.log 2>&1; echo "qmm bench rc=$? $(el) s"
grep -E "^(bench|copy|linear)," $OUT/qmm.log > $OUT/qmm_tiled_s18a.csv
for f in $OUT/sv_*.csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/serve_s18a.csv; rm -f $OUT/sv_*.csv
echo "== serve (conc, reqs, errors, ttft mean, p50, itl mean, p99, out tok/s)"; grep -v '^concurrency' $OUT/serve_s18a.csv | cut -d, -f1-3,5,6,9,10,13
echo "== read patterns"; cut -d, -f2,5-7 $OUT/readpattern_s18a.csv
echo "== qmm (64 and 128 rows)"; grep -E "^linear," $OUT/qmm_tiled_s18a.csv | grep -E ",(64|128)," | grep -v before | cut -d, -f2-7
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
