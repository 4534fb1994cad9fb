# s13r4 (issues 25, 21): first GPU run of the helpers' work merged into main: attention sinks, KV-shared
# layers, MoE biases / clamped SwiGLU / routed MoE (gpt-oss, Gemma 4 E and MoE), Gated DeltaNet and sigmoid
# gates (Qwen3.5), plus the MoE grouped path on real rows only. GPU tests with the new fixtures, the attention
# variants, the delta-net bench; then the batch ladders (Llama-3.1-8B, Qwen3-30B-A3B, synthetic 4-bit) and
# serving Llama at concurrency 1/16/64/128 (512-token prompts, 256 output tokens) and 4096-token prompts at 16.
# Predictions: Qwen3-30B-A3B batch-64 step 47.8 (s13r1) -> ~25 ms (attention 9 -> 3.6 ms, moe_act/gather
# 5 -> <1 ms); serving c64 4601 (s13r2) -> ~4900 tok/s with the narrow qmm4 form.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 300 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestConformanceVariants/(ticketmerge|notile|notileticket)/(Attention|DecodeLayer|MoE)|TestModelsGPU|TestEngine|TestMoEDecode$|TestMoEPrefill$|TestGraphReplay' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|^        --- FAIL|> [0-9.e-]+" $OUT/t.log | head -40; grep -c -- "--- PASS" $OUT/t.log
grep -E "^\s+(---|model_gpu_test|model_hybrid).*(gpt_oss|gemma4_e|gemma4_moe|gemma3|qwen3_5)" $OUT/t.log | head -20
MLXCEL_CUDA_BENCH=1 timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchDeltaNet$' > $OUT/dn.log 2>&1; echo "deltanet bench rc=$?"; grep -vE "^(=== RUN|--- PASS|PASS)" $OUT/dn.log | tail -8
timeout 100 .gpu/mlxcel bench decode --profile llama-3.1-8b-4bit --backend cuda --batch 1,8,16,32,64,128,256 --context 1024 --steps 16 $TOK --csv $OUT/batch_llama.csv > $OUT/bl.log 2>&1; echo "llama batch rc=$?"
MLXCEL_CUDA_PROFILE=74 timeout 100 .gpu/mlxcel bench decode --profile qwen3-30b-a3b-4bit --backend cuda --batch 1,8,32,64,128 --context 1024 --steps 16 $TOK --csv $OUT/batch_qwen3moe.csv > $OUT/bm.log 2>&1; echo "moe batch rc=$?"
timeout 45 .gpu/mlxcel bench decode --profile llama-3.1-8b-4bit --backend cuda --max-tokens 256 --repeat 2 $TOK > $OUT/d.log 2>&1; grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 60); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
for c in 1 16 64 128; do n=$((c * 2)); [ $c = 1 ] && n=4
  timeout 60 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency $c --requests $n --prompt-tokens 512 --max-tokens 256 --ignore-eos --quiet $TOK --metrics --out $OUT/serve_c$c.csv > $OUT/sv_c$c.log 2>&1; echo "serve c$c rc=$?"; done
timeout 60 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 16 --requests 32 --prompt-tokens 4096 --max-tokens 128 --ignore-eos --quiet $TOK --metrics --out $OUT/serve_long.csv > $OUT/sv_long.log 2>&1; echo "serve long rc=$?"
kill $spid; wait $spid 2>/dev/null
echo "== table"; for f in batch_llama batch_qwen3moe; do echo $f; cut -d, -f2,5,6,10 $OUT/$f.csv | paste -sd' '; done
grep -A10 "cuda profile" $OUT/bm.log | cut -c1-70
for f in $OUT/serve_c1.csv $OUT/serve_c16.csv $OUT/serve_c64.csv $OUT/serve_c128.csv $OUT/serve_long.csv; do tail -1 $f | cut -d, -f1,5,6,9,10,13; done
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
