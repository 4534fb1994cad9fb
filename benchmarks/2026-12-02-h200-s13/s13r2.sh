# s13r2 (issue 21): attn_dtile, the tensor-core tile kernel of batched decode attention (from 16 sequences).
# GPU tests (conformance incl. AttentionBatchDecode, models, engine), the in-process A/B of the batch step
# (TestBenchBatchDecodeTuning: default = tile from 16, notile = attn_decode, tile1 = tile at every batch),
# profiled batch-64 steps of Llama-3.1-8B and Qwen3-30B-A3B (synthetic 4-bit), and serving at 64 streams.
# Predictions: batch-64 step 17.1 -> ~11 ms (attention 9.7 -> ~3.5 ms at ~0.65 of the copy rate); 128 rows
# 32.4 -> ~20 ms; batch 16/32 a few ms faster; serving c64 3829 -> ~5000 tok/s.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestModelsGPU|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|> [0-9.e-]+$|engine_gpu_test.go:1[0-9][0-9]: " $OUT/t.log | head -20; grep -c -- "--- PASS" $OUT/t.log
grep -E "AttentionBatchDecode.*step[12]" $OUT/t.log | head -12
MLXCEL_CUDA_BENCH=1 timeout 200 .gpu/cuda.test -test.count=1 -test.run 'TestBenchBatchDecodeTuning$' > $OUT/tune.csv 2> $OUT/tune.err; echo "tune rc=$?"
for m in llama-3.1-8b-4bit qwen3-30b-a3b-4bit; do
  MLXCEL_CUDA_PROFILE=74 timeout 90 .gpu/mlxcel bench decode --profile $m --backend cuda --batch 64 --context 1024 --steps 16 $TOK > $OUT/prof_$m.log 2>&1; echo "prof $m rc=$?"
done
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 60); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
timeout 40 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64 --requests 128 --prompt-tokens 512 --max-tokens 256 --ignore-eos --quiet $TOK --out $OUT/serve_c64.csv > /dev/null 2>&1; echo "serve rc=$?"
kill $spid; wait $spid 2>/dev/null
echo "== table"; grep -E "^(default|notile|tile1)," $OUT/tune.csv
for m in llama-3.1-8b-4bit qwen3-30b-a3b-4bit; do echo "$m"; grep -A12 "cuda profile" $OUT/prof_$m.log | cut -c1-80; grep -oE "batch 64[^)]*" $OUT/prof_$m.log | head -2; done
tail -1 $OUT/serve_c64.csv | cut -d, -f1,5,6,9,10,13
