# s12r1 (issue 21): GPU tests of the s11r2+ build (argmax NaN flag, clamped feed token, exact GELU), then the
# batch ladder baseline (decode steps of B sequences at 1k context, dequant+cuBLAS above 32 rows) and kernel
# profiles of the batch-8 and batch-64 steps. Synthetic Llama-3.1-8B 4-bit weights of the real shapes.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 240 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestLibrary|TestSmoke|TestConformance|TestGraphReplay|TestModelsGPU|TestMoEPrefill$|TestMoEDecode$|TestEngine' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)" $OUT/t.log | head -20; grep -c -- "--- PASS" $OUT/t.log
L=llama-3.1-8b-4bit
timeout 150 .gpu/mlxcel bench decode --profile $L --backend cuda --batch 1,8,16,32,33,64,128,256 --context 1024 --steps 16 $TOK --csv $OUT/batch_base.csv > $OUT/b.log 2>&1; echo "batch rc=$?"
for B in 8 64; do MLXCEL_CUDA_PROFILE=3 timeout 60 .gpu/mlxcel bench decode --profile $L --backend cuda --batch $B --context 1024 --steps 4 $TOK > $OUT/p$B.log 2>&1; echo "prof $B rc=$?"; done
echo "== table"; cat $OUT/batch_base.csv; for B in 8 64; do echo "-- profile $B"; grep -A10 "cuda profile" $OUT/p$B.log | head -11; done
