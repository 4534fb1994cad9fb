# s10r3: the five-profile long-prompt ladder (benchmarks/2026-11-30-h200-s10/cuda_h200_longprompt_2026-11-30.csv). TestCeilings
# timed out here (first kernel compile on a fresh machine); the ceilings are from s10r4.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_CSV=$OUT/ceilings.csv timeout 40 .gpu/cuda.test -test.count=1 -test.run 'TestCeilings' > $OUT/ceil.log 2>&1; echo "ceilings rc=$?"; grep -E "copy|gemm" $OUT/ceil.log | tail -4
A="--backend cuda --lengths 512,2048,8192,32768 --max-tokens 64 --max-prefill-seconds 60 --out $OUT/ladder"
timeout 230 .gpu/mlxcel bench ladder $A --profiles llama-3.1-8b-4bit,qwen2.5-7b-4bit,qwen3-30b-a3b-4bit --tokenizer .gpu/tokenizers/llama3_1 > $OUT/l1.log 2>&1; echo "ladder1 rc=$?"
timeout 160 .gpu/mlxcel bench ladder $A --profiles mixtral-8x7b-4bit --tokenizer .gpu/testdata/models/stories260k --name ladder2 > $OUT/l2.log 2>&1; echo "ladder2 rc=$?"
timeout 140 .gpu/mlxcel bench ladder $A --profiles gemma-4-31b-it-4bit --tokenizer .gpu/tokenizers/llama3_1 --name ladder3 > $OUT/l3.log 2>&1; echo "ladder3 rc=$?"
rm -f $OUT/ladder/*.md $OUT/ladder/*.svg $OUT/ladder/*.png; ls $OUT/ladder
echo "== table"; grep -E "^ +[a-z].*(ok|SKIP|FAIL)" $OUT/l1.log $OUT/l2.log $OUT/l3.log
