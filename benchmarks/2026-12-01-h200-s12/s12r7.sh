# Prepared in session 12, run as the first call of session 13 (2026-12-02, outputs in ../2026-12-02-h200-s13/).
# s12r7 (issue 21): the final build of the session. GPU tests (conformance, models, the engine's batch
# invariance alone / among 64 / among 64 preempted by a 40-block cache); batch-1 decode (256 tokens) as the
# README's 455 tok/s is measured; serving at concurrency 64 (512-token prompts, 256 output tokens) with
# --max-batched-tokens 1024 and 512 against the default 2048 of s12r5, for ITL p99 against TTFT.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 120 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestModelsGPU|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|> [0-9.e-]+$|engine_gpu_test.go:1[0-9][0-9]: " $OUT/t.log | head -20; grep -c -- "--- PASS" $OUT/t.log
timeout 45 .gpu/mlxcel bench decode --profile llama-3.1-8b-4bit --backend cuda --max-tokens 256 --repeat 2 $TOK > $OUT/d.log 2>&1; grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log
for mbt in 1024 512; do
  .gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --max-batched-tokens $mbt --port 18080 $TOK > $OUT/serve_$mbt.log 2>&1 &
  spid=$!
  for _ in $(seq 1 60); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
  timeout 40 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64 --requests 128 --prompt-tokens 512 --max-tokens 256 --ignore-eos --quiet $TOK --out $OUT/serve_c64_mbt$mbt.csv > /dev/null 2>&1; echo "serve mbt $mbt rc=$?"
  kill $spid; wait $spid 2>/dev/null
done
echo "== table"; for f in $OUT/serve_c64_mbt*.csv; do echo "$f"; tail -1 $f | cut -d, -f1,5,6,8,9,10,13; done
# Added in session 13: the MoE batch ladder (issue 21 asks Qwen3-30B-A3B >= 8,000 tok/s at 64 streams).
timeout 120 .gpu/mlxcel bench decode --profile qwen3-30b-a3b-4bit --backend cuda --batch 1,8,32,64,128 --context 1024 --steps 16 $TOK --csv $OUT/batch_qwen3moe.csv > $OUT/bm.log 2>&1; echo "moe batch rc=$?"
cut -d, -f2,5,6 $OUT/batch_qwen3moe.csv | paste -sd' '
