# s19b: the grouped expert GEMM (moe_qmma4) at two blocks an SM for every scale form (s19a measured the bf16 one:
# Qwen3-30B-A3B steps at 32/64 sequences 17.3/20.4 ms against 23.2/27.2), checked, and A/B'd old (main before,
# .gpu/old) against new on gpt-oss-20b (mxfp4, moe_qmma4_fp) batch steps and on the MoE prefill ladder at 2048
# (prefill tiles of 9-32 rows now take qmma4_impl<4,1>: half the slabs in flight). Then Tuning.MoEGEMMRows: 8-24
# tokens on the grouped GEMM ("grouped") against the three-launch per-token path (default below 32).
# Predictions: conformance passes (moegrouped8 too); gpt-oss batch 32/64 1.15-1.35x faster; prefill at 2048 within
# +-5% (prefill is many tiles a launch, occupancy matters less); grouped beats per-token at 16 and 24 tokens on
# Qwen3 (16 tokens x top-8 over 128 experts read ~81 experts once against 128 slot reads) by 1.2-1.5x, loses at 8.
set -u
for f in .gpu/mlxcel .gpu/cuda.test .gpu/old/mlxcel; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 170 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$|TestConformanceVariants/^moegrouped8$/MoE|TestModelsGPU$|TestMoE' > $OUT/t.log 2>&1
echo "tests rc=$? $(el) s"; grep -E "^(--- FAIL|FAIL|ok|panic)|^    --- FAIL|^        --- FAIL|CUDA_ERROR" $OUT/t.log | head -12
for v in old new old new; do
  d=.gpu; [ $v = old ] && d=.gpu/old
  timeout 60 $d/mlxcel bench decode --backend cuda --profile gpt-oss-20b-mxfp4-q8 --batch 32,64 --quiet $TOK --csv $OUT/cuda_h200_batch_gptoss_$v.csv > $OUT/gb_$v.log 2>&1; echo "gpt-oss batch $v rc=$? $(el) s"
done
for v in old new; do
  d=.gpu; [ $v = old ] && d=.gpu/old
  timeout 90 $d/mlxcel bench ladder --backend cuda --profiles qwen3-30b-a3b-4bit,gpt-oss-20b-mxfp4-q8 --lengths 2048 --max-tokens 8 --quiet $TOK --out $OUT --name ladder_$v > $OUT/l_$v.log 2>&1; echo "ladder $v rc=$? $(el) s"
done
MLXCEL_CUDA_BENCH=1 timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestBenchBatchDecodeTuningMoE$' > $OUT/moeb.log 2>&1; echo "moe batch rc=$? $(el) s"
grep -E "^(tuning|qwen3|gpt-oss)" $OUT/moeb.log > $OUT/cuda_h200_batch_moe_s19b.csv
echo "== gpt-oss batch (old, new)"; for v in old new; do tail -n +2 $OUT/cuda_h200_batch_gptoss_$v.csv | cut -d, -f1-12 | sed "s/^/$v,/"; done
echo "== ladder 2048"; for v in old new; do tail -n +2 $OUT/ladder_$v.csv | cut -d, -f1-8 | sed "s/^/$v,/"; done
echo "== moe steps"; cat $OUT/cuda_h200_batch_moe_s19b.csv
rm -f $OUT/*.png $OUT/*.svg; cd $OUT && tar czf logs.tgz *.log && rm -f *.log
