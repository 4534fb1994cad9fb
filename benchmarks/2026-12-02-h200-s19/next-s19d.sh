# s19d: where the step time goes now (MLXCEL_CUDA_PROFILE: one step, kernels one by one without graphs): a
# 64-sequence decode step at 1k context of synthetic Qwen3-30B-A3B, gpt-oss-20b and Llama-3.1-8B, and gpt-oss-20b's
# batch-1 decode step (s15d: 2944 us, the mxfp4 per-token MoE kernels at ~0.9 TB/s half of it).
# Predictions: Qwen3 at 64: moe_qmma4_bf ~12-14 of ~24 ms profiled; Llama at 64: qmm4 ~7.5 of ~10.5 ms.
set -u
for f in .gpu/mlxcel; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
for m in qwen3-30b-a3b-4bit gpt-oss-20b-mxfp4-q8 llama-3.1-8b-4bit; do
  MLXCEL_CUDA_PROFILE=74 timeout 80 .gpu/mlxcel bench decode --profile $m --backend cuda --batch 64 --context 1024 --steps 16 --quiet $TOK > $OUT/prof64_$m.log 2>&1; echo "prof64 $m rc=$? $(el) s"
done
MLXCEL_CUDA_PROFILE=40 timeout 70 .gpu/mlxcel bench decode --profile gpt-oss-20b-mxfp4-q8 --backend cuda --max-tokens 64 --quiet $TOK > $OUT/prof1_gptoss.log 2>&1; echo "prof1 gpt-oss rc=$? $(el) s"
for f in $OUT/prof*.log; do echo "== $(basename $f .log)"; grep -A14 "cuda profile of step" $f | cut -c1-80; done
cd $OUT && for f in prof*.log; do grep -A200 "cuda profile of step" $f | grep -E "cuda profile|calls" > ${f%.log}.txt; done; tar czf logs.tgz *.log && rm -f *.log
