# s10r1: the three variants written after the ninth session's device time, checked and A/B'd (interleaved).
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 240 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$/MoE|TestMoEDecode|TestModelsGPU|TestConformanceVariants/(moedpf|moeaddnorm|deccluster)/(MoE|DecodeLayer)' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)" $OUT/t.log | head -20
MLXCEL_CUDA_MOEADDNORM=1 MLXCEL_CUDA_MOEDPF=1 MLXCEL_CUDA_DECCLUSTER=1 timeout 60 .gpu/cuda.test -test.count=1 -test.run 'TestModelsGPU' > $OUT/t2.log 2>&1; echo "models with the three variants rc=$?"; tail -3 $OUT/t2.log
d() { env $2 timeout 70 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log); echo "$1 $2 ${r:-FAIL $(tail -2 $OUT/d.log)}" | tee -a $OUT/sum.txt; }
L=llama-3.1-8b-4bit Q=qwen3-30b-a3b-4bit
d $L X=1; d $L MLXCEL_CUDA_DECCLUSTER=1; d $Q X=1; d $Q MLXCEL_CUDA_DECCLUSTER=1
d $Q MLXCEL_CUDA_MOEADDNORM=1; d $Q MLXCEL_CUDA_MOEDPF=1; d $Q X=1; d $Q MLXCEL_CUDA_MOEADDNORM=1; d $Q MLXCEL_CUDA_MOEDPF=1
d $Q "MLXCEL_CUDA_DECCLUSTER=1 MLXCEL_CUDA_MOEADDNORM=1 MLXCEL_CUDA_MOEDPF=1"
d $L MLXCEL_CUDA_DECCLUSTER=1
echo "== table"; cat $OUT/sum.txt
