# s12r5 (issue 21): the committed build (qmm4 for 33-128 rows). GPU tests; TestBenchBatchDecodeTuning (batch-64
# and -128 decode steps at 1k context under attention/qmm tunings, interleaved twice, with the kernel profile of
# one batch-64 decode step); serving at concurrency 1/16/64/128 (512-token prompts, 256 output tokens) and
# 4096-token prompts at 16 (128 output tokens), mlxcel serve --parallel 0. Synthetic Llama-3.1-8B 4-bit weights.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestConformanceVariants|TestGraphReplay|TestModelsGPU|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|> [0-9.e-]+$|engine_gpu_test.go:1[0-9][0-9]: [0-9]" $OUT/t.log | head -20; grep -c -- "--- PASS" $OUT/t.log
MLXCEL_CUDA_BENCH=1 MLXCEL_CUDA_PROFILE=75 MLXCEL_TOKENIZERS=$PWD/.gpu/tokenizers timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuning' > $OUT/tune.log 2>&1; echo "tune rc=$?"
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 120); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
sv() { timeout 90 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency $1 --requests $2 --prompt-tokens $3 --max-tokens $4 --ignore-eos --quiet $TOK --metrics --out $OUT/serve_$5.csv > $OUT/sv_$5.log 2>&1; echo "serve $5 rc=$?"; }
sv 1 4 512 256 c1; sv 16 32 512 256 c16; sv 64 128 512 256 c64; sv 128 256 512 256 c128; sv 16 32 4096 128 long16
kill $spid; wait $spid 2>/dev/null
echo "== table"; grep -A12 "cuda profile" $OUT/tune.log | head -13; grep -E "^[a-z0-9]+,[0-9]+,1024," $OUT/tune.log; tail -3 $OUT/tune.log
for f in $OUT/serve_*.csv; do echo "$f"; tail -1 $f | cut -d, -f1,5,6,8,9,10,13; done
