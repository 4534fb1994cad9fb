# s15a: the warpgroup-MMA qmm4 forms (kernels/qmm_wgmma.cu: qmm4_w64, qmm4_w128) on main + this session's kernel,
# first GPU run. Tests first (the merge gate: conformance incl. LinearMany, the variants qmm_w128/noqmmw, models,
# batch invariance), then the in-process A/Bs (TestBenchQMM: qmm4 forms vs the warpgroup forms at 32/64/128 rows;
# TestBenchBatchDecodeTuning: batch steps default vs noqmmw), then serving at 16/64/128 streams (issue 21's table).
# Predictions (synthetic Llama-3.1-8B 4-bit shapes): 64 rows 14336x4096 qmm4 46-49 us -> w64 12-18 us; 4096x4096
# 18.8 -> 6-8 us; 4096x14336 48.7 -> 13-18 us; 1024x4096 ~3-5 us; w128 at 128 rows ~1.2-1.5x w64 at 64. Batch step
# at 64 x 1k: 9.5 ms -> 4.0-5.0 ms; serving c64 7.3k -> 11-13k output tok/s. Most likely wrong: the B descriptor's
# LBO/SBO roles (all LinearMany/Linear rows >= 33 wrong by a permutation: then swap them), NVRTC not defining
# __CUDA_ARCH_FEAT_SM90_ALL (the kernels trap: illegal instruction in the first qmm test).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 300 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestKernel|TestLaunch' > $OUT/t.log 2>&1; echo "conformance rc=$? $(el) s"
grep -E "compile|cache hit" $OUT/t.log | head -3
grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|^    --- FAIL" $OUT/t.log | head -12
grep -E "LinearMany|Linear/.*rows=(40|64|97)" $OUT/t.log | grep -iE "fail|err|mismatch" | head -8
timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/(qmm_w128|noqmmw)|TestModelsGPU|TestEngineBatchInvarianceGPU' > $OUT/t2.log 2>&1; echo "variants/models rc=$? $(el) s"
grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|^    --- FAIL|^        --- FAIL" $OUT/t2.log | head -12
MLXCEL_CUDA_BENCH=1 timeout 90 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchQMM$' > $OUT/qmm.log 2>&1; echo "qmm bench rc=$? $(el) s"
MLXCEL_CUDA_BENCH=1 timeout 120 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuning' > $OUT/batch.log 2>&1; echo "batch bench rc=$? $(el) s"
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 90); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
SC=benchmarks/2026-12-02-h200-s13/ints_schema.json
for run in c64w:64: c64:64: c128:128: c16:16: s64:64:schema; do
  IFS=: read name c mode <<< "$run"; fmt=""; [ "$mode" = schema ] && fmt="--response-format @$SC"
  timeout 45 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency $c --requests $((c*2)) --prompt-tokens 512 --max-tokens 256 \
    $fmt --quiet $TOK --out $OUT/sv_$name.csv > $OUT/sv_$name.log 2>&1; echo "serve $name rc=$? $(el) s"
done
kill $spid; wait $spid 2>/dev/null
for f in $OUT/sv_*.csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/serve_s15a.csv; rm -f $OUT/sv_*.csv
echo "== qmm (us, GB/s, of copy)"; grep -E "^linear," $OUT/qmm.log | cut -d, -f2-7 | head -40
echo "== batch"; grep -E "^[a-z0-9]+,[0-9]+,1024," $OUT/batch.log
echo "== serve"; grep -v '^concurrency' $OUT/serve_s15a.csv | cut -d, -f1-3,5,6,9,10,11,13
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
