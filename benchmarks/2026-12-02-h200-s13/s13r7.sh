# s13r7 (issue 21): the session's final build: qmm4 from 17 rows by default (QMMMinRows 17; s13r6 24 rows
# 10.56 -> 7.83 ms, 32 rows 11.47 -> 8.32), DecodeLayer at those rows bounded as Linear (bf16 activations).
# The GPU suite with the variants that keep the other paths (qmm33: qmma4 for 17-32 rows, noqmm, notile),
# then the Llama batch ladder and batch-1 decode for the README.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestConformanceVariants/(qmm33|noqmm|notile)/(DecodeLayer|Linear|Sequences|Attention)|TestModelsGPU|TestEngine|TestGraphReplay' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|^        --- FAIL|> [0-9.e-]+$" $OUT/t.log | head -20; grep -c -- "--- PASS" $OUT/t.log
grep -E "engine_gpu_test.go:1[0-9][0-9]: " $OUT/t.log | head -3
timeout 100 .gpu/mlxcel bench decode --profile llama-3.1-8b-4bit --backend cuda --batch 1,8,16,24,32,48,64,128,256 --context 1024 --steps 16 $TOK --csv $OUT/batch_llama.csv > $OUT/bl.log 2>&1; echo "llama batch rc=$?"
timeout 45 .gpu/mlxcel bench decode --profile llama-3.1-8b-4bit --backend cuda --max-tokens 256 --repeat 2 $TOK > $OUT/d.log 2>&1; grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log
echo "== table"; cut -d, -f2,5,6,10 $OUT/batch_llama.csv | paste -sd' '
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
