#!/usr/bin/env bash
# gpu-check.sh: the CUDA backend's checks and benchmarks on a GPU machine.
#
#   scripts/gpu-check.sh build    # here (no GPU needed): build the binaries into .gpu/
#   scripts/gpu-check.sh [run]    # on the GPU machine, from the repository root
#
# The run uses only the prebuilt binaries (CGO_ENABLED=0 Go test binaries
# drive CUDA through dlopen), so the GPU machine needs no Go toolchain. Logs
# and the benchmark CSV go to $OUT (or ./gpu-out); a short table is printed
# last. Environment: MLXCEL_CUDA_BENCH=0 skips the benchmarks (MLXCEL_BENCH_PREFILL=0
# drops prefill),
# MLXCEL_BENCH_DECODE=0 the synthetic decode run, GPU_TESTS overrides the
# -test.run pattern of the test step. SERVE_CONCURRENCY=1,16 adds a serving
# run (SERVE_ARGS: more mlxcel serve flags, e.g. --no-run-ahead).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-run}" = build ]; then
	set -e
	mkdir -p .gpu
	# Fixtures for TestModelsGPU: shared/ beside the checkout does not travel.
	for f in tiny/llama-bf16 tiny/qwen2-bf16 tiny/qwen3-bf16 tiny/llama-mlx-q4g64 tiny/qwen2-mlx-q4g64 \
		tiny/qwen3-mlx-q4g64 models/stories260k tiny/qwen3_moe-bf16 tiny/qwen3_moe-mlx-q4g64 tiny/mixtral-bf16 \
		tiny/mixtral-mlx-q4g64 tiny/gemma4-bf16 tiny/gemma4-mlx-q4g64 tiny/qwen3_5_text-bf16 tiny/qwen3_5_text-mlx-q4g64 \
		tiny/qwen3_5_moe_text-bf16 tiny/qwen3_5_moe_text-mlx-q4g64 tiny/gpt_oss-bf16 tiny/gpt_oss-mxfp4 tiny/gpt_oss-mlx-mxfp4-q8g64 tiny/gemma4_e-bf16 \
		tiny/gemma4_e-mlx-q4g64 tiny/gemma4_moe-bf16 tiny/gemma4_moe-mlx-q4g64 tiny/gemma3_text-bf16 \
		tiny/gemma3_text-mlx-q4g64; do
		if [ -d "../shared/testdata/$f" ]; then mkdir -p ".gpu/testdata/$f" && cp -r "../shared/testdata/$f/." ".gpu/testdata/$f/"; fi
	done
	for tk in llama3_1 qwen3; do # the serving runs' tokenizers (a profile's own vocabulary decodes every id)
		if [ -d ../shared/testdata/tokenizers/$tk ]; then
			mkdir -p .gpu/tokenizers && cp -r ../shared/testdata/tokenizers/$tk .gpu/tokenizers/
		fi
	done
	# Stripped binaries: the working tree that travels is limited to 64 MiB.
	rm -rf .gpu/kcache .gpu/mlxcel-bench-decode
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .gpu/cuda.test ./internal/backend/cuda/
	if [ -d internal/model ] && ls internal/model/*gpu*_test.go >/dev/null 2>&1; then
		CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .gpu/model.test ./internal/model/
	fi
	# The mlxcel CLI carries bench decode, ladder and serve.
	CGO_ENABLED=0 go build -ldflags="-s -w" -o .gpu/mlxcel ./cmd/mlxcel
	ls -la .gpu
	exit 0
fi

OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
# The kernel cache and the cubin stay out of $OUT: the device tool brings
# back at most 8 files, and the logs and CSVs are the ones that matter.
export MLXCEL_CUDA_CACHE=${MLXCEL_CUDA_CACHE:-${TMPDIR:-/tmp}/mlxcel-kcache}
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
	nvcc -cubin -arch=sm_90a -std=c++17 -Xptxas -v "$OUT/kernels.cu" -o "${TMPDIR:-/tmp}/kernels.cubin" >"$OUT/ptxas.log" 2>&1
	rm -f "$OUT/kernels.cu"
	grep -A4 -E "Compiling entry function '(qgemvm4_bf|qmma4_bf_1|qmma4_bf_2|qmma4_bf_4|flash_attn_64|flash_attn_128|attention)'" "$OUT/ptxas.log" | grep -E "entry|registers|spill" | head -24
fi

echo "== tests"
if [ -d .gpu/testdata ]; then export MLXCEL_TESTDATA=${MLXCEL_TESTDATA:-$PWD/.gpu/testdata}; fi
timeout ${TEST_TIMEOUT:-240} .gpu/cuda.test -test.v -test.count=1 -test.run "${GPU_TESTS:-TestLibrary|TestSmoke|TestConformance|TestGraphReplay|TestModelsGPU|TestMoEPrefill|TestSample|TestEngineRowSamplingGPU}" 2>&1 | tee "$OUT/test.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
if [ -x .gpu/model.test ]; then
	echo "== model tests"
	.gpu/model.test -test.v -test.count=1 -test.run 'GPU' 2>&1 | tee "$OUT/model.log"
	[ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

if [ "${MLXCEL_CUDA_BENCH:-1}" != 0 ]; then
	echo "== benchmarks"
	rm -f "$OUT/bench.csv"
	MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_CSV="$OUT/bench.csv" timeout ${BENCH_TIMEOUT:-300} .gpu/cuda.test -test.v -test.count=1 -test.run TestBench 2>&1 | tee "$OUT/bench.log"
	[ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

if [ -x .gpu/mlxcel ] && [ "${MLXCEL_CUDA_BENCH:-1}" != 0 ]; then
	# The issue's decode figure: synthetic Llama-3.1-8B 4-bit through the model
	# code (mlxcel bench decode = mlxcel-bench-decode).
	echo "== mlxcel bench decode"
	tok=""
	[ -d .gpu/tokenizers/llama3_1 ] && tok="--tokenizer .gpu/tokenizers/llama3_1"
	timeout ${DECODE_TIMEOUT:-150} .gpu/mlxcel bench decode --profile llama-3.1-8b-4bit --backend cuda --max-tokens ${DECODE_TOKENS:-128} $tok \
		--csv "$OUT/decode.csv" 2>&1 | tail -20 | tee "$OUT/decode.log"
fi

tok=""
[ -d .gpu/tokenizers/llama3_1 ] && tok="--tokenizer .gpu/tokenizers/llama3_1"
# Batch-1 decode of other profiles (e.g. the MoE qwen3-30b-a3b-4bit). The
# llama3_1 tokenizer stands in for each profile's own (the ids only size
# the prompt; every vocabulary here is larger than Llama's).
for p in ${DECODE_PROFILES:-}; do
	echo "== mlxcel bench decode $p"
	timeout ${DECODE_TIMEOUT:-150} .gpu/mlxcel bench decode --profile "$p" --backend cuda --max-tokens 64 $tok \
		--csv "$OUT/decode.csv" 2>&1 | tail -4 | tee -a "$OUT/decode.log"
done
if [ -x .gpu/mlxcel ] && [ -n "${LADDER_LENGTHS:-}" ]; then
	# The long-prompt ladder through the model code (synthetic weights), and
	# the ceilings its note divides by, measured in the same call.
	echo "== ceilings"
	MLXCEL_CUDA_BENCH=1 MLXCEL_BENCH_CSV="$OUT/ceilings.csv" timeout 150 .gpu/cuda.test -test.count=1 -test.run 'TestCeilings$' 2>&1 |
		grep -E '^(copy|gemm),' | tee "$OUT/ceilings.log"
	echo "== ladder"
	timeout ${LADDER_TIMEOUT:-300} .gpu/mlxcel bench ladder --backend cuda --profiles "${LADDER_PROFILES:-llama-3.1-8b-4bit}" --lengths "$LADDER_LENGTHS" \
		--max-tokens ${LADDER_TOKENS:-64} $tok --out "$OUT/ladder" ${LADDER_ARGS:-} 2>&1 | tail -30 | tee "$OUT/ladder.log"
fi
if [ -x .gpu/mlxcel ] && [ -n "${LADDER2_LENGTHS:-}" ]; then
	echo "== ladder (second set)"
	# LADDER2_TOKENIZER: a stand-in tokenizer for this set, e.g.
	# .gpu/testdata/models/stories260k for mixtral-8x7b-4bit (the shared Mixtral tokenizer.json has 3
	# tokens, and Llama 3's ids overflow Mixtral's 32000-token vocabulary).
	tok2=$tok
	[ -n "${LADDER2_TOKENIZER:-}" ] && tok2="--tokenizer $LADDER2_TOKENIZER"
	timeout ${LADDER_TIMEOUT:-300} .gpu/mlxcel bench ladder --backend cuda --profiles "$LADDER2_PROFILES" --lengths "$LADDER2_LENGTHS" \
		--max-tokens ${LADDER_TOKENS:-64} $tok2 --out "$OUT/ladder" --name ladder2 ${LADDER_ARGS:-} 2>&1 | tail -30 | tee -a "$OUT/ladder.log"
fi

if [ -x .gpu/mlxcel ] && [ -n "${SERVE_CONCURRENCY:-}" ]; then
	# Serving: mlxcel serve on synthetic weights, loaded by mlxcel bench serve
	# over loopback (streaming chat, ignore_eos so every request decodes
	# --max-tokens).
	echo "== serve ${SERVE_PROFILE:-llama-3.1-8b-4bit}"
	.gpu/mlxcel serve --profile "${SERVE_PROFILE:-llama-3.1-8b-4bit}" --backend ${SERVE_BACKEND:-cuda} --parallel ${SERVE_PARALLEL:-16} --ctx-size ${SERVE_CTX:-2048} \
		--port 18080 $tok ${SERVE_ARGS:-} >"$OUT/serve.log" 2>&1 &
	spid=$!
	for _ in $(seq 1 120); do
		if command -v curl >/dev/null; then curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break
		else python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:18080/health')" 2>/dev/null && break; fi
		sleep 1
	done
	timeout ${SERVE_TIMEOUT:-200} .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency "$SERVE_CONCURRENCY" \
		--requests ${SERVE_REQUESTS:-32} --prompt-tokens ${SERVE_PROMPT:-128} --max-tokens ${SERVE_TOKENS:-128} --ignore-eos \
		$tok --metrics --out "$OUT/serve.csv" 2>&1 | tail -40 | tee "$OUT/serve_bench.log"
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
fi

echo "== summary"
grep -E '^(=== RUN|--- (PASS|FAIL|SKIP))' "$OUT/test.log" | grep -E '^--- ' | sed 's/^/  /' | head -20
grep -hE -- '--- FAIL|Error|panic' "$OUT"/*.log | head -20
[ -f "$OUT/decode.csv" ] && cat "$OUT/decode.csv"
if [ -f "$OUT/bench.csv" ]; then
	column -s, -t "$OUT/bench.csv" 2>/dev/null || cat "$OUT/bench.csv"
fi
exit $status
