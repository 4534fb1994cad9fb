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
	# Fixtures for TestModelsGPU: shared/ beside the checkout does not travel.
	for f in tiny/llama-bf16 tiny/qwen2-bf16 tiny/qwen3-bf16 tiny/llama-mlx-q4g64 tiny/qwen2-mlx-q4g64 \
		tiny/qwen3-mlx-q4g64 models/stories260k; do
		if [ -d "../shared/testdata/$f" ]; then mkdir -p ".gpu/testdata/$f" && cp -r "../shared/testdata/$f/." ".gpu/testdata/$f/"; fi
	done
	if [ -d ../shared/testdata/tokenizers/llama3_1 ]; then
		mkdir -p .gpu/tokenizers && cp -r ../shared/testdata/tokenizers/llama3_1 .gpu/tokenizers/
	fi
	CGO_ENABLED=0 go test -c -o .gpu/cuda.test ./internal/backend/cuda/
	if [ -d internal/model ] && ls internal/model/*gpu*_test.go >/dev/null 2>&1; then
		CGO_ENABLED=0 go test -c -o .gpu/model.test ./internal/model/
	fi
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

if command -v nvcc >/dev/null; then
	# Registers, spills and shared memory of the hot kernels (ptxas -v).
	MLXCEL_DUMP_SRC="$OUT/kernels.cu" .gpu/cuda.test -test.run TestDumpSource >/dev/null 2>&1
	nvcc -cubin -arch=sm_90 -std=c++17 -Xptxas -v "$OUT/kernels.cu" -o "$OUT/kernels.cubin" >"$OUT/ptxas.log" 2>&1
	grep -A4 -E "Compiling entry function '(qgemv4_bf_1|qgemv4_bf_2|qgemv4_bf_8|qgemv8_bf_1|dgemv_bf16_1|attention)'" "$OUT/ptxas.log" | grep -E "entry|registers|spill" | head -24
fi

echo "== tests"
if [ -d .gpu/testdata ]; then export MLXCEL_TESTDATA=${MLXCEL_TESTDATA:-$PWD/.gpu/testdata}; fi
.gpu/cuda.test -test.v -test.count=1 -test.run "${GPU_TESTS:-TestLibrary|TestSmoke|TestConformance|TestGraphReplay|TestModelsGPU}" 2>&1 | tee "$OUT/test.log"
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

if [ -x .gpu/mlxcel-bench-decode ] && [ "${MLXCEL_CUDA_BENCH:-1}" != 0 ]; then
	# The issue's decode figure: synthetic Llama-3.1-8B 4-bit through the model code.
	echo "== mlxcel-bench-decode"
	tok=""
	[ -d .gpu/tokenizers/llama3_1 ] && tok="--tokenizer .gpu/tokenizers/llama3_1"
	.gpu/mlxcel-bench-decode --profile llama-3.1-8b-4bit --backend cuda --max-tokens ${DECODE_TOKENS:-128} $tok \
		--csv "$OUT/decode.csv" 2>&1 | tail -20 | tee "$OUT/decode.log"
fi

echo "== summary"
grep -E '^(=== RUN|--- (PASS|FAIL|SKIP))' "$OUT/test.log" | grep -E '^--- ' | sed 's/^/  /' | head -20
grep -hE -- '--- FAIL|Error|panic' "$OUT"/*.log | head -20
[ -f "$OUT/decode.csv" ] && cat "$OUT/decode.csv"
if [ -f "$OUT/bench.csv" ]; then
	column -s, -t "$OUT/bench.csv" 2>/dev/null || cat "$OUT/bench.csv"
fi
exit $status
