//go:build linux

package cuda

import (
	"strconv"
	"strings"

	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
)

// Tolerance reports where this backend is not f32-exact, for the
// conformance suite:
//   - Linear over more than gemmRows rows runs through cuBLAS on bf16
//     operands (f32 accumulation), or TF32 for f32/f16 weights, and 4-bit
//     Linear over the qmm4 kernels' rows (Tuning.QMMMinRows and up) on
//     weights dequantized to bf16 and bf16 activations, as cuBLAS does;
//   - 4-bit Linear with groups of 64 or more over 2..QMMMinRows-1 rows runs
//     on the tensor cores with activations rounded to f16 (11 bits) after
//     a power-of-two scale;
//   - the KV cache holds f16 (11 significant bits), so every attention
//     result carries f16 rounding of K and V;
//   - with --kv-cache-dtype fp8 (backendtest.RunKV, ops ending /kv=fp8)
//     both sides store the same E4M3 codes, each exact in f16, so the
//     cache's rounding cancels out of the comparison; what is left is the
//     tensor-core kernels' f16 Q and P (as above) and the rare value that
//     the two backends' inputs (RoPE folded into the kernel here, applied
//     apart on the CPU) put on opposite sides of a rounding boundary,
//     where one code step is 2^-4 relative (3 mantissa bits), a hundred
//     times f16's: a few of those among ~1e5 values move the normalised
//     error by ~1e-3, hence a bound above the f16 cache's;
//   - attention over steps with a sequence of 16 or more tokens runs the
//     flash kernel on f16 Q, K, V and P (head dims 64, 128, 256 and 512);
//   - MoE of 4-bit experts (affine, mxfp4, nvfp4) over plan.MoEGEMMFrom
//     rows or more runs the grouped expert GEMM on the tensor cores (f16
//     activations);
//   - a whole layer (DecodeLayer) carries those through the projections
//     (bf16 activations from QMMMinRows rows on 4-bit weights, which a
//     30-row prefill step leaves in the cache).
func (b *Backend) Tolerance(op string, rows int) float64 {
	linear := strings.HasPrefix(op, "Linear") || strings.HasPrefix(op, "Sequences")
	switch {
	case linear && (rows > gemmRows || b.Tuning.QMMMinRows > 0 && rows >= b.Tuning.QMMMinRows && strings.Contains(op, "/q4")):
		return 1e-2
	case linear && rows >= 2 && (strings.Contains(op, "/q4g64") || strings.Contains(op, "/q4g128")):
		return 1e-3
	case strings.HasPrefix(op, "MoE") && b.moeGEMMRowsOf(op, rows):
		// MoE of 4-bit experts (affine, mxfp4, nvfp4) over many rows takes
		// the grouped expert GEMM (ops_moe.go), on f16 activations.
		return 1e-2
	case strings.HasPrefix(op, "DecodeLayer") && strings.Contains(op, "moe=true") && (strings.HasSuffix(op, "/down") || strings.HasSuffix(op, "/residual")):
		// The routing weights' softmax amplifies the rounding in its input:
		// one seed of ~15 on the H200 gave 4.3e-3 on the MoE output.
		return 1e-2
	case strings.HasPrefix(op, "DecodeLayer") && b.Tuning.QMMMinRows > 0 && b.Tuning.QMMMinRows <= 30 && strings.Contains(op, "/q4"):
		// The case's 30-row prefill runs its 4-bit products on bf16
		// activations (qmm4), as Linear at those rows, and the cache
		// carries that rounding into the decode steps after it.
		return 1e-2
	case strings.HasPrefix(op, "DecodeLayer"): // attention's f16 K/V (and f16 tensor-core inputs) carried through a layer
		return 3e-3
	case strings.HasPrefix(op, "Attention") && strings.HasSuffix(op, "/kv=fp8"):
		return 5e-3
	case strings.HasPrefix(op, "Attention") && rows >= 16:
		return 3e-3
	case strings.HasPrefix(op, "Attention"):
		return 2e-3
	}
	return 0
}

// moeGEMMRowsOf reports whether a conformance MoE op (named .../E<n>/...
// /top<k>/...) over rows tokens runs the grouped expert GEMM: 4-bit
// experts and at least plan.MoEGEMMFrom tokens.
func (b *Backend) moeGEMMRowsOf(op string, rows int) bool {
	fp := strings.Contains(op, "/mxfp4") || strings.Contains(op, "/nvfp4")
	if !fp && !strings.Contains(op, "/q4") {
		return false
	}
	E, topk := 0, 0
	for _, f := range strings.Split(op, "/") {
		if n, err := strconv.Atoi(strings.TrimPrefix(f, "E")); err == nil && strings.HasPrefix(f, "E") {
			E = n
		} else if n, err := strconv.Atoi(strings.TrimPrefix(f, "top")); err == nil && strings.HasPrefix(f, "top") {
			topk = n
		}
	}
	if E == 0 || topk == 0 {
		return rows >= plan.MoEDecodeMaxTokens
	}
	return rows >= plan.MoEGEMMFrom(b.Tuning, E, topk, fp)
}
