# s19e: moe_act's grid from the experts' width (moeActBlocks: gpt-oss 45 blocks a tile, Qwen3 12; was 4): s19d's
# gpt-oss-20b 64-sequence profile had moe_act at 64 us a layer (1.5 of 22.8 ms). MoE conformance, then batch steps.
# Predictions: conformance passes; gpt-oss-20b steps at 32 / 64 sequences 19.92 / 21.37 ms (s19c) -> ~19.3 / ~20.2;
# Qwen3-30B-A3B 17.21 / 20.34 -> within 0.3 ms.
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$/^MoE|TestMoE' > $OUT/t.log 2>&1; echo "tests rc=$? $(el) s"
grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL" $OUT/t.log | head -8; echo "passes: $(grep -c -- '--- PASS' $OUT/t.log)"
for m in gpt-oss-20b-mxfp4-q8 qwen3-30b-a3b-4bit; do
  timeout 50 .gpu/mlxcel bench decode --backend cuda --profile $m --batch 32,64 --quiet $TOK --csv $OUT/cuda_h200_batch_moe_s19e.csv > $OUT/b_$m.log 2>&1; echo "$m rc=$? $(el) s"
done
cut -d, -f1-8 $OUT/cuda_h200_batch_moe_s19e.csv
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
