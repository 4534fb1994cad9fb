# s12r4 (issue 21): the final qmm4 build (17-128 rows; 32- and 64-row tiles). GPU tests, kernel profiles of
# batch-32 and batch-64 decode steps at 1k context, then serving: mlxcel serve --parallel 0 (slots from
# --gpu-memory-utilization) on synthetic Llama-3.1-8B 4-bit weights, mlxcel bench serve at concurrency
# 1/16/64/128 (512-token prompts, 256 output tokens) and 4096-token prompts at 16 (128 output tokens).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 250 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance|TestGraphReplay|TestModelsGPU|TestMoEDecode$|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|> [0-9.e-]+$|engine_gpu_test.go:1[0-9][0-9]: [0-9]" $OUT/t.log | head -20; grep -c -- "--- PASS" $OUT/t.log
for B in 32 64; do MLXCEL_CUDA_PROFILE=$((B+3)) timeout 60 .gpu/mlxcel bench decode --profile llama-3.1-8b-4bit --backend cuda --batch $B --context 1024 --steps 4 $TOK > $OUT/p$B.log 2>&1; echo "prof $B rc=$?"; done
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 120); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
grep -iE "slots|parallel|kv" $OUT/serve.log | head -3
sv() { timeout 90 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency $1 --requests $2 --prompt-tokens $3 --max-tokens $4 --ignore-eos --quiet $TOK --metrics --out $OUT/serve_$5.csv > $OUT/sv_$5.log 2>&1; echo "serve $5 rc=$?"; }
sv 1 4 512 256 c1; sv 16 32 512 256 c16; sv 64 128 512 256 c64; sv 128 256 512 256 c128; sv 16 32 4096 128 long16
kill $spid; wait $spid 2>/dev/null
echo "== table"; for B in 32 64; do echo "-- profile $B"; grep -A9 "cuda profile" $OUT/p$B.log | head -10; done
for f in $OUT/serve_*.csv; do echo "$f"; cat $f; done
