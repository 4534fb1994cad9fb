#!/usr/bin/env bash
# gpu-check.sh: the CUDA backend's checks and benchmarks on a GPU machine.
#
#   scripts/gpu-check.sh build    # here (no GPU needed): build the binaries into .gpu/
#   scripts/gpu-check.sh [run]    # on the GPU machine, from the repository root
#
# The run uses only the prebuilt binaries (CGO_ENABLED=0 Go test binaries
# drive CUDA through dlopen), so the GPU machine needs no Go toolchain. Logs
# and the benchmark CSV go to $OUT (or ./gpu-out); a short table is printed
# last. Environment: MLXCEL_CUDA_BENCH=0 skips the benchmarks,
# MLXCEL_BENCH_DECODE=0 the synthetic decode run, GPU_TESTS overrides the
# -test.run pattern of the test step.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-run}" = build ]; then
	set -e
	mkdir -p .gpu
	CGO_ENABLED=0 go test -c -o .gpu/cuda.test ./internal/backend/cuda/
	if [ -d internal/model ] && ls internal/model/*gpu*_test.go >/dev/null 2>&1; then
		CGO_ENABLED=0 go test -c -o .gpu/model.test ./internal/model/
	fi
	if [ -d cmd/mlxcel ]; then CGO_ENABLED=0 go build -o .gpu/mlxcel ./cmd/mlxcel || true; fi
	if [ -d cmd/mlxcel-bench-decode ]; then CGO_ENABLED=0 go build -o .gpu/mlxcel-bench-decode ./cmd/mlxcel-bench-decode || true; fi
	ls -la .gpu
	exit 0
fi

OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export MLXCEL_CUDA_CACHE=${MLXCEL_CUDA_CACHE:-$OUT/kcache}
status=0

{
	echo "== device"
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
	echo "== libraries (ldconfig)"
	ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvrtc|libcublas' || echo "(none in ldconfig)"
	echo "== libraries (folders)"
	ls /usr/local/nvidia/lib64/libcuda.so* /usr/local/cuda*/targets/x86_64-linux/lib/lib{nvrtc,cublas}*.so* 2>&1 | head -20
} >"$OUT/env.log" 2>&1
cat "$OUT/env.log"

echo "== tests"
.gpu/cuda.test -test.v -test.count=1 -test.run "${GPU_TESTS:-TestLibrary|TestSmoke|TestConformance|TestGraphReplay}" 2>&1 | tee "$OUT/test.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
if [ -x .gpu/model.test ]; then
	echo "== model tests"
	.gpu/model.test -test.v -test.count=1 -test.run 'GPU' 2>&1 | tee "$OUT/model.log"
	[ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

if [ "${MLXCEL_CUDA_BENCH:-1}" != 0 ]; then
	echo "== benchmarks"
	rm -f "$OUT/bench.csv"
	MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_CSV="$OUT/bench.csv" .gpu/cuda.test -test.v -test.count=1 -test.run TestBench 2>&1 | tee "$OUT/bench.log"
	[ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

echo "== summary"
grep -E '^(=== RUN|--- (PASS|FAIL|SKIP))' "$OUT/test.log" | grep -E '^--- ' | sed 's/^/  /' | head -20
grep -hE -- '--- FAIL|Error|panic' "$OUT"/*.log | head -20
if [ -f "$OUT/bench.csv" ]; then
	column -s, -t "$OUT/bench.csv" 2>/dev/null || cat "$OUT/bench.csv"
fi
exit $status
