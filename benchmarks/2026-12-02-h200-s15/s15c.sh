# s15c: main with s15-nvrtcpar merged (12 NVRTC programs in parallel, sm_90a), qmm4_w128 for 65-128 rows (qmm4 up to
# 64), the weight-line A/B (_h forms: cp.async .L2::128B), the fixed sampled run-ahead GPU test, serving figures.
# Predictions: first compile 15-25 s (was 1:55-2:10); TestKernelProgramsCompile 9-12 compiles at once. _h forms:
# +0-15% (if each 32-byte weight read cost a 64-byte DRAM burst, up to 2x). Batch step: 64 = 9.4 ms (qmm4), 96 ~12,
# 128 ~13 ms. Serving c64 ~7.2k (as s14d; ITL 8.7), c128 ~8-8.5k, schema c64 within 5% of plain, sampled +10-20%.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestKernel|TestLaunch|TestNVRTCArch' > $OUT/t.log 2>&1; echo "conformance rc=$? $(el) s"
grep -E "compile .*cache hit" $OUT/t.log | head -1 | sed 's/.*(compile/(compile/'; grep -E "programs|at once" $OUT/t.log | head -3
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL" $OUT/t.log | head -12
MLXCEL_CUDA_CACHE=/tmp/kc2 timeout 120 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestKernelProgramsCompile' > $OUT/pc.log 2>&1; echo "programs compile rc=$? $(el) s"
grep -vE "^=== RUN" $OUT/pc.log | tail -6
MLXCEL_CUDA_BENCH=1 timeout 80 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchQMM$' > $OUT/qmm.log 2>&1; echo "qmm bench rc=$? $(el) s"
echo "== qmm (us, GB/s, of copy)"; grep -E "^linear," $OUT/qmm.log | cut -d, -f2-7
timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/(qmm_w128|noqmmw)/Linear|TestModelsGPU|TestEngine|TestDeltaChunkGPU' > $OUT/t2.log 2>&1; echo "variants/models/engine rc=$? $(el) s"
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL|^        --- FAIL" $OUT/t2.log | head -16; grep -E "tight cache|run ahead:" $OUT/t2.log | head -4
MLXCEL_CUDA_BENCH=1 timeout 90 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuning' > $OUT/batch.log 2>&1; echo "batch bench rc=$? $(el) s"
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 90); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
SC=benchmarks/2026-12-02-h200-s13/ints_schema.json
for run in c64w:64:plain c64:64:plain s64:64:schema t64:64:sampled c128:128:plain c16:16:plain c1:1:plain s64b:64:schema c64b:64:plain; do
  IFS=: read name c mode <<< "$run"; fmt=""; n=$((c*2)); [ $c = 1 ] && n=4
  [ "$mode" = schema ] && fmt="--response-format @$SC"; [ "$mode" = sampled ] && fmt="--temperature 0.8 --top-p 0.95"
  timeout 45 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency $c --requests $n --prompt-tokens 512 --max-tokens 256 \
    --ignore-eos=false $fmt --quiet $TOK --out $OUT/sv_$name.csv > $OUT/sv_$name.log 2>&1; echo "serve $name rc=$? $(el) s"
done
kill $spid; wait $spid 2>/dev/null
for f in $OUT/sv_*.csv; do echo "# $(basename $f .csv)"; cat $f; done > $OUT/serve_s15c.csv; rm -f $OUT/sv_*.csv
echo "== batch"; grep -E "^[a-z0-9]+,[0-9]+,1024," $OUT/batch.log
echo "== serve"; grep -v '^concurrency' $OUT/serve_s15c.csv | cut -d, -f1-3,5,6,9,10,11,13
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
