package plan

// QMMMinRows and QMMMaxRows bound the activation rows a 4-bit product
// runs on the fused qmm4 kernels (batched decode): below, the qmma4 and
// GEMV kernels, whose f16 activations are ten times more precise than
// qmm4's bf16; above, cuBLAS on dequantized weights, where one
// dequantization serves enough rows to win (at 256 rows it did on every
// Llama shape; s12r3). From 17 rows the 64-row tile is faster (s13r6,
// batch step of synthetic Llama-3.1-8B 4-bit at 1k context, qmma4 /
// qmm4: 24 rows 10.56 / 7.83 ms, 32 rows 11.47 / 8.32), but at 17 rows
// its bf16 rounding moved the Qwen3.5 MoE fixture's routing (incremental
// logits after a 17-token prefill 0.101 against 3.4e-3, s13r7), so 17-32
// rows stay on qmma4. An f16 form on a converted copy of x kept the bounds
// but lost the speed to the conversion launch (s19a, batch 24 9.30 ms;
// notes/cuda-session-19.md).
const (
	QMMMinRows = 33
	QMMMaxRows = 128
)

// qmmKernel is one form of the qmm4 kernel: its name, threads a block and
// the blocks an SM holds at once (the split-K count aims at one wave of
// them). "wide" is 8 warps of one m16 tile (two 256-thread blocks of at
// most 128 registers); "m2d1" 4 warps of two m16 tiles with one weight
// slab in flight (three 128-thread blocks). Measured on the H200 at 64
// rows (s13r3, us): 4096x4096 26.2 / 18.8, 4096x14336 68.8 / 48.7,
// 14336x4096 46.1 / 52.9; so m2d1 takes matrices of up to QMMNarrowRows
// weight rows (a layer's o and down, and q with k and v joined to it),
// wide the others (gate and up).
type qmmKernel struct {
	name           string
	threads, perSM int
	tile, smem     int // activation rows a block; dynamic shared memory bytes (0: static only)
}

// "w128" is the warpgroup-MMA form (kernels/qmm_wgmma.cu, sm_90a): 256
// threads over 128 weight rows and a tile of 128 activation rows, a ring
// of 4 slabs in dynamic shared memory (QMMWSmem). Deeper rings (5 and 9
// slabs) lost their A/B (s16a, notes/cuda-session-17.md).
var qmmKernels = map[string]qmmKernel{
	"wide": {"qmm4_bf_64", 256, 2, 64, 0},
	"m2d1": {"qmm4_bf_64_m2d1", 128, 3, 64, 0},
	"w128": {"qmm4_w128", 256, 2, 128, QMMWSmem()},
}

// QMMWSmem is the dynamic shared memory of the warpgroup form: its ring
// of 4 slabs (weights 128 x 32 bytes, x 128 x 128 bytes, scales 128 x 16
// bytes a slab), which the partial tile (128 x 132 floats) reuses after the
// loop, 1024 bytes to start the ring at a 1024-byte boundary (the x tiles'
// swizzle) and the slots' mbarriers.
func QMMWSmem() int { return qmmwSmem(4) }

func qmmwSmem(slabs int) int {
	return max(slabs*(128*32+128*128+128*16), 128*132*4) + 1024 + 8*max(slabs, 8)
}

// QMMWMinRows is the fewest activation rows a product takes the warpgroup
// form with. Measured on the H200 (s15b, TestBenchQMM, us, Llama-3.1-8B
// shapes 4096x4096 / 14336x4096 / 4096x14336): at 128 rows qmm4_w128 30.2
// / 53.2 / 67.7 against qmm4's best 40.3 / 82.5 / 101.3; at 64 rows its
// 64-row tile 23.8 / 43.6 / 58.1 against 18.9 / 45.9 / 48.5 (batch step at
// 64 sequences 10.05 against 9.44 ms), so up to 64 rows qmm4 stays.
const QMMWMinRows = 65

// QMMNarrowRows is the most weight rows a product takes the m2d1 form with.
const QMMNarrowRows = 4096

// qmmForm is the kernel form of an N-row product of M activation rows:
// the tuning's when set (benchmarks), else from QMMWMinRows rows the
// warpgroup form's 128-row tile when the device has it, else qmm4's by N.
func qmmForm(t Tuning, N, M int) (qmmKernel, bool) {
	if t.QMMVariant != "" {
		k, ok := qmmKernels[t.QMMVariant]
		return k, ok
	}
	if t.QMMWarpgroup && M > QMMWMinRows-1 {
		return qmmKernels["w128"], true
	}
	if N <= QMMNarrowRows {
		return qmmKernels["m2d1"], true
	}
	return qmmKernels["wide"], true
}

// QMMKernels lists the names of the qmm4 kernel forms.
func QMMKernels() []string {
	return []string{"qmm4_bf_64", "qmm4_bf_64_m2d1", "qmm4_w128"}
}

// QMMWKernel is a warpgroup form: its variant name (Tuning.QMMVariant),
// kernel and dynamic shared memory.
type QMMWKernel struct {
	Variant, Name string
	Smem          int
}

// QMMWKernels lists the warpgroup forms (they need sm_90a and their
// dynamic shared memory opted in): the planner's first, then the
// candidates only benchmarks pick (none now: list one here to A/B it).
func QMMWKernels() []QMMWKernel {
	var ks []QMMWKernel
	for _, v := range []string{"w128"} {
		k := qmmKernels[v]
		ks = append(ks, QMMWKernel{v, k.name, k.smem})
	}
	return ks
}

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
	Threads, PerSM      int // block size; blocks an SM (QMMSplit)
	Smem                int // dynamic shared memory bytes
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
	k, ok := qmmForm(t, w.N, M)
	if !ok {
		return QMM{}, false
	}
	gx, gy := (M+k.tile-1)/k.tile, (w.N+QMMWeightRows-1)/QMMWeightRows
	q := QMM{Kernel: k.name, GridX: gx, GridY: gy, Split: 1, TileRows: k.tile, Threads: k.threads, PerSM: k.perSM, Smem: k.smem}
	if t.Clusters {
		q.Split = QMMSplit(gx*gy, w.K, SMs, k.perSM)
	}
	return q, true
}

// QMMSplit is the split-K count of a qmm4 launch of blocks blocks over K:
// enough to fill one wave of the device, each split keeping at least 4
// slabs of 64, at most a portable cluster.
func QMMSplit(blocks, K, SMs, perSM int) int {
	return max(1, min((perSM*max(SMs, 1)+blocks/2)/max(blocks, 1), qmmMaxSplits, K/64/4))
}
