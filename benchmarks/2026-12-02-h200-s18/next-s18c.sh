# next-s18c: where the many-row 4-bit products lose their time (s18b: the layout is not it; the kernels reach
# 0.12-0.17 of the copy rate at 64-128 rows while a no-math read in their order reaches 0.52-0.63).
# Nsight Compute, one launch per distinct launch configuration (so one per shape and row count), on
# TestBenchQMM's qmm4_w128 (65-128 rows, wgmma), qmm4_bf_64 and its m2d1 form (the 64-row mma.sync kernels), and
# TestBenchTiledRows' qmma4_bf_1_xc (2-8 rows) beside the one-row qgemv4_bf_1 GEMV.
# Predictions: qmm4_w128 DRAM throughput ~15% of peak, issue-slot utilisation > 60% (the dequantization's ALU work,
# not memory, limits it), top stall "math pipe throttle" or "wait"; qmma4_bf_1_xc at 8 rows: DRAM ~25%, top stall
# "long scoreboard" (too few bytes in flight: a warp has one 8-byte load a row in flight).
set -u
gunzip -kf .gpu/cuda.test.gz; chmod +x .gpu/cuda.test
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc MLXCEL_CUDA_BENCH=1
S=$(date +%s); el() { echo $(( $(date +%s)-S )); }
timeout 60 .gpu/cuda.test -test.count=1 -test.run 'TestKernelProgramsCompile' > $OUT/warm.log 2>&1; echo "warm cache rc=$? $(el) s"
NCU="ncu --clock-control none --target-processes all --filter-mode per-launch-config -c 1"
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section ComputeWorkloadAnalysis --section LaunchStats --metrics smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio"
timeout 260 $NCU -k regex:'^(qmm4_w128|qmm4_bf_64|qmm4_bf_64_m2d1)$' $SEC --csv .gpu/cuda.test -test.count=1 -test.run 'TestBenchQMM$' > $OUT/ncu_qmm.csv 2> $OUT/ncu_qmm.log
echo "ncu qmm rc=$? $(el) s"
timeout 200 $NCU -k regex:'^(qmma4_bf_1_xc|qmma4_bf_2_xc|qgemv4_bf_1)$' $SEC --csv .gpu/cuda.test -test.count=1 -test.run 'TestBenchTiledRows$' > $OUT/ncu_qmma.csv 2> $OUT/ncu_qmma.log
echo "ncu qmma rc=$? $(el) s"
python3 - $OUT/ncu_qmm.csv $OUT/ncu_qmma.csv <<'PY'
import csv, sys
want = ["Duration", "DRAM Throughput", "Compute (SM) Throughput", "Issue Slots Busy", "Achieved Occupancy",
        "Registers Per Thread", "L2 Hit Rate", "No Eligible", "Warp Cycles Per Issued Instruction"]
for fn in sys.argv[1:]:
    rows = {}
    try:
        r = [x for x in csv.reader(open(fn)) if len(x) >= 15]
    except OSError:
        continue
    for x in r[1:]:
        key = (x[0], x[4], x[8])
        rows.setdefault(key, {})[x[12]] = x[14]
    print("==", fn.split("/")[-1], "id|kernel|grid|" + "|".join(w.split()[0] + w.split()[-1] for w in want))
    for (i, k, g), m in rows.items():
        st = sorted(((float(v.replace(",", "")), n.split("stalled_")[1].split("_per")[0]) for n, v in m.items()
                     if "issue_stalled" in n and v.replace(",", "").replace(".", "").isdigit()), reverse=True)[:4]
        print("|".join([i, k, g] + [m.get(w, "-") for w in want] + ["%s %.2f" % (n, v) for v, n in st]))
PY
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
