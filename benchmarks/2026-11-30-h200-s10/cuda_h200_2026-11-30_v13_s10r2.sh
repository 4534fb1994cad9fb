# s10r2: clusters on by default; Qwen3 against Llama three times interleaved, and Qwen3 variants.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 200 .gpu/cuda.test -test.count=1 -test.run 'TestConformance$|TestMoEDecode|TestModelsGPU|TestConformanceVariants/decclusteroff|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$?"; tail -3 $OUT/t.log
d() { env $2 timeout 70 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log); echo "$1 $2 ${r:-FAIL $(tail -2 $OUT/d.log)}" | tee -a $OUT/sum.txt; }
L=llama-3.1-8b-4bit Q=qwen3-30b-a3b-4bit
d $Q X=1; d $L X=1; d $Q MLXCEL_CUDA_DECHEADS=2; d $Q MLXCEL_CUDA_DECHEADS=4
d $Q X=1; d $L X=1; d $Q MLXCEL_CUDA_DECSPLITKEYS=32; d $Q MLXCEL_CUDA_NORMFUSE=heads,router; d $Q MLXCEL_CUDA_NORMFUSE=heads,gemv
d $Q X=1; d $L X=1; d $L MLXCEL_CUDA_DECHEADS=2
MLXCEL_CUDA_PROFILE=20 timeout 90 .gpu/mlxcel bench decode --profile $Q --backend cuda --max-tokens 64 --repeat 1 $TOK > $OUT/prof.log 2>&1; echo "profile rc=$?"
echo "== table"; cat $OUT/sum.txt
