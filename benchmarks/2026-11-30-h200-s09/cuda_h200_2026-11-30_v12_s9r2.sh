#!/bin/bash
# Session 9, run 2: the new MoE defaults (block router, o6 gate/up) checked and timed; serving at
# concurrency 1 and 16 with and without the engine's run-ahead; the long-context ladder A/B.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc; TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 60 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/(routewarp|moegu64)/MoE|TestMoEDecode|TestModelsGPU' > $OUT/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- )?FAIL|panic|^--- (PASS|SKIP)" $OUT/t.log | head
d() { env $2 timeout 70 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 --repeat 3 $TOK > $OUT/d.log 2>&1; r=$(grep -oE "decode 256 tokens [0-9.]+ ms \([0-9.]+ tok/s" $OUT/d.log | grep -oE "[0-9.]+ tok/s"); echo "decode,$1,$2,$r" >> $OUT/s9r2.csv; grep -E "copy rate" $OUT/d.log | head -1; }
Q=qwen3-30b-a3b-4bit; d $Q X=1; d llama-3.1-8b-4bit X=1; d $Q MLXCEL_CUDA_DECHG=1; d $Q X=1
for a in "" "--no-run-ahead"; do
  mkdir -p $OUT/serve$a
  OUT=$OUT/serve$a SERVE_ARGS="$a" GPU_TESTS=TestLibraryDiscovery MLXCEL_CUDA_BENCH=0 SERVE_CONCURRENCY=1,16 SERVE_TIMEOUT=120 bash scripts/gpu-check.sh run > $OUT/serve$a.log 2>&1
  sed "s|^|serve $a: |" $OUT/serve$a/serve.csv; grep -E "run_ahead_steps_total" $OUT/serve$a/serve_bench.log | head -2
done
l() { env $1 timeout 100 .gpu/mlxcel bench ladder --backend cuda --profiles llama-3.1-8b-4bit --lengths 8192,32768 --max-tokens 64 $TOK --out $OUT/ladder --name "l_$2" > $OUT/l_$2.log 2>&1; tail -4 $OUT/l_$2.log | sed "s|^|ladder $1: |"; }
l X=1 def; l "MLXCEL_CUDA_DECHG=1 MLXCEL_CUDA_DECWAVES=4" hg; l MLXCEL_CUDA_DECPF=1 pf
echo "== table"; cat $OUT/s9r2.csv
