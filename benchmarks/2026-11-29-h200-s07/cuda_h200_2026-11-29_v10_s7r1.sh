#!/bin/bash
# Session 7, run 1: the three kernels written in session 6 (qgemvh4, branch-free qgemvt4, qmma4 _xc):
# conformance, GEMV bench, Llama decode with/without GEMVH; ncu issue/pipe metrics on the gate/up launch.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
TOK="--tokenizer .gpu/tokenizers/llama3_1"
timeout 150 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformanceVariants/(half|half16|tc|mmaxc)/(Linear|Decode)' > $OUT/tv.log 2>&1; echo "variant tests rc=$?"; grep -E "^(--- )?FAIL|panic|^ok|^PASS|normalised error .*>" $OUT/tv.log | head -8
MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_QUICK=1 MLXCEL_BENCH_DECODE=0 MLXCEL_BENCH_CSV=$OUT/bench.csv timeout 150 .gpu/cuda.test -test.count=1 -test.run 'TestBench$' > $OUT/bench.log 2>&1; echo "bench rc=$?"
d() { echo "$1 $2 | $(env $2 timeout 60 .gpu/mlxcel bench decode --profile $1 --backend cuda --max-tokens 256 $TOK --quiet --csv $OUT/decode.csv 2>&1 | grep -E 'ok|FAIL' | awk '{print $(NF-1)}')"; }
for i in 1 2; do d llama-3.1-8b-4bit X=1; d llama-3.1-8b-4bit MLXCEL_CUDA_GEMVH=1; d llama-3.1-8b-4bit MLXCEL_CUDA_GEMVH=16; done
M=gpu__time_duration.sum,launch__grid_size,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__warps_issue_stalled_long_scoreboard.avg,smsp__warps_issue_stalled_no_instruction.avg,smsp__warps_active.avg.per_cycle_active
for e in X=1 MLXCEL_CUDA_GEMVH=1; do env $e timeout 90 ncu --clock-control none -k regex:'^qgemv[mh]4_bf$' --launch-count 12 --csv --metrics $M .gpu/mlxcel bench decode --profile llama-3.1-8b-4bit --backend cuda --max-tokens 4 $TOK > $OUT/ncu_$e.csv 2>&1; echo "ncu $e rc=$?"; done
echo "== bench"; cut -d, -f2,4,5,7 $OUT/bench.csv | grep -E "q4g64(-half1|-half16|-tc)?,1,|mma(xc)?,|q8g64|copy" | grep -v "x2048\|x768" | tr '\n' ' '
echo; echo "== ncu gate/up launch (grid 3584): metric value"; for e in X=1 MLXCEL_CUDA_GEMVH=1; do echo "-- $e"; awk -F'","' '$5 ~ /qgemv/ && $9 ~ /3584/ {print $5, $13, $NF}' $OUT/ncu_$e.csv | sed 's/"//g' | head -11; done
