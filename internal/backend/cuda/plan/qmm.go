package plan

import "fmt"

// QMMMinRows and QMMMaxRows bound the activation rows a 4-bit product
// runs on the fused qmm4 kernels (batched decode): below, the qmma4 and
// GEMV kernels, whose f16 activations are ten times more precise than
// qmm4's bf16 (a 32-row tile was 2x faster on the 14336-row matrices, but
// its rounding flipped a MoE layer's expert choice in the conformance
// suite); above, cuBLAS on dequantized weights, where
// one dequantization serves enough rows to win (at 256 rows it did on
// every Llama shape). notes/cuda-kernels.md has the measurements (s12r3).
const (
	QMMMinRows = 33
	QMMMaxRows = 128
)

// qmmBlocksPerSM is the blocks of a qmm4 kernel an SM holds at once (two
// 256-thread blocks of at most 128 registers a thread): the split-K count
// aims at one wave of them.
const qmmBlocksPerSM = 2

// QMMWeightRows is the weight rows a qmm4 block covers (8 warps of 16).
const QMMWeightRows = 128

// qmmMaxSplits is the portable thread block cluster size the split-K
// blocks merge their partial tiles in.
const qmmMaxSplits = 8

// QMM is the plan of one fused many-row 4-bit product: the kernel (its
// activation-row tile), the grid (x: row tiles, y: weight-row blocks) and
// the split-K count, which is the grid z and the cluster depth.
type QMM struct {
	Kernel              string
	GridX, GridY, Split int
	TileRows            int
}

// PlanQMM plans y[M, N] = x[M, K] @ W^T on the qmm4 kernels, or reports
// false when the weight or the row count is not theirs: 4 affine bits, bf16
// scales, groups of 16 to 128, K a multiple of 64, M within the tuning's
// range.
func PlanQMM(w Weight, M, SMs int, t Tuning) (QMM, bool) {
	if t.QMMMinRows <= 0 || M < t.QMMMinRows || M > t.QMMMaxRows || !w.Quant || w.FP || w.Bits != 4 || w.ScalesF32 ||
		w.GroupShift < 4 || w.GroupShift > 7 || w.K%64 != 0 || w.N <= 0 {
		return QMM{}, false
	}
	const tile = 64
	gx, gy := (M+tile-1)/tile, (w.N+QMMWeightRows-1)/QMMWeightRows
	return QMM{Kernel: fmt.Sprintf("qmm4_bf_%d", tile), GridX: gx, GridY: gy, Split: QMMSplit(gx*gy, w.K, SMs), TileRows: tile}, true
}

// QMMSplit is the split-K count of a qmm4 launch of blocks blocks over K:
// enough to fill one wave of the device, each split keeping at least 4
// slabs of 64, at most a portable cluster.
func QMMSplit(blocks, K, SMs int) int {
	return max(1, min((qmmBlocksPerSM*max(SMs, 1)+blocks/2)/max(blocks, 1), qmmMaxSplits, K/64/4))
}
