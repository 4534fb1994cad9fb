package plan

import "fmt"

// Weight describes a matrix of N output rows by K inputs for the product
// planners: quantized (Bits, group 1<<GroupShift, bf16 or f32 scale pairs,
// or FP: one of MLX's floating-point modes, bf16 scales and no biases) or
// dense (ElemBytes 2 or 4, Dense "bf16", "f16" or "f32").
type Weight struct {
	N, K       int
	Quant      bool
	Bits       int
	GroupShift int
	ScalesF32  bool
	FP         bool
	FPPair     bool // nvfp4 with two groups' scales a word (GroupShift 5)
	ElemBytes  int
	Dense      string
}

func (w Weight) scaleName() string {
	if w.FPPair {
		return "fp2"
	}
	if w.FP {
		return "fp"
	}
	if w.ScalesF32 {
		return "f32"
	}
	return "bf"
}

// GEMVKind says which family of kernel a product runs on.
type GEMVKind int

const (
	// GEMVMulti: one activation row, 4 or 8 bits (qgemvm*): the launch
	// q/k/v and gate/up merge into (the caller's peepholes).
	GEMVMulti GEMVKind = iota
	// GEMVTensorCore: 2-32 rows, 4 bits, groups of 64 or more (qmma4*).
	GEMVTensorCore
	// GEMVRows: the fast kernels by rows a block (qgemv*, dgemv*).
	GEMVRows
	// GEMVGeneric: any layout (qgemvgen*, dgemvs*), one warp a row; the
	// quantized form takes the bit width as its last argument.
	GEMVGeneric
)

// GEMVShape is one product: M activation rows; Experts when the rows
// take their experts from routing ids (every row its own grid y), Slots
// the grid z (all top-k slots in one launch); XAligned when x is 16-byte
// aligned, Aligned when its row stride is too; MMA false keeps it off the
// tensor cores (MoE routers: f32 logits for the top-k).
type GEMVShape struct {
	M                 int
	Experts           bool
	Slots             int
	XAligned, Aligned bool
	MMA               bool
	SMs               int  // the device's multiprocessors (the K split's size)
	Clusters          bool // the device launches thread block clusters (Tuning.Clusters): K splits take them
}

// GEMV is the plan of one product launch.
type GEMV struct {
	Kind                       GEMVKind
	Kernel                     string // "" for GEMVMulti (the caller picks it by row length, RowGroupLanes)
	GridX, GridY, GridZ, Block int
	Cluster                    int // blocks a thread block cluster along z (0: none)
}

// QMMAWarps is the warps of a qmma4 block (QMMA_W), each taking slabs of K.
const QMMAWarps = 8

// QMMASplit is the K split of a K-split qmma4 launch of blocks row
// blocks: about two blocks an SM over the grid (its blocks run two an
// SM), at most 8 (a portable cluster) and at least a slab a warp.
func QMMASplit(blocks, K, sms int) int {
	if sms <= 0 {
		sms = 132
	}
	return max(1, min(8, K/64/QMMAWarps, (2*sms+blocks/2)/blocks))
}

// TensorCoreRows is the most activation rows the qmma4 kernels take; more
// go to cuBLAS on dequantized weights.
const TensorCoreRows = 32

// PlanGEMV picks the kernel of a product with at most TensorCoreRows rows
// (a few-row decode step, MoE experts).
func PlanGEMV(w Weight, s GEMVShape) GEMV {
	M, N, K := s.M, w.N, w.K
	fastQuant := w.Quant && (w.Bits == 4 || w.Bits == 8) && (K*w.Bits/32)%4 == 0
	// The one-row kernels take a 16-byte chunk (128/Bits codes) with one
	// scale word: nvfp4's groups of 16 4-bit codes are half a chunk, so
	// unless its rows hold whole pairs of groups (FPPair, a word for both)
	// it takes the rows kernels (one scale a word) even for one row.
	chunked := fastQuant && 1<<w.GroupShift >= 128/w.Bits
	if M == 1 && !s.Experts && chunked && s.XAligned {
		return GEMV{Kind: GEMVMulti}
	}
	if s.MMA && M >= 2 && M <= TensorCoreRows && !s.Experts && w.Quant && !w.FP && w.Bits == 4 && w.GroupShift >= 6 && K%64 == 0 && s.Aligned {
		// Up to 8 activation rows per mma column tile; bf16 scales up to
		// 16 rows take the _xc kernels (x loaded with the weights).
		nt := 1
		switch {
		case M > 16:
			nt = 4
		case M > 8:
			nt = 2
		}
		name := fmt.Sprintf("qmma4_%s_%d", w.scaleName(), nt)
		// bf16 scales: K split over a cluster of blocks, and up to 16
		// rows the _xc kernels.
		split := !w.ScalesF32
		if split && nt <= 2 {
			name += "_xc"
		}
		split = split && s.Clusters
		const rows = 32 // weight rows a block
		g := GEMV{Kind: GEMVTensorCore, Kernel: name, GridX: (N + rows - 1) / rows, GridY: 1, GridZ: 1, Block: 256}
		if split {
			if z := QMMASplit(g.GridX, K, s.SMs); z > 1 {
				g.GridZ, g.Cluster = z, z
			}
		}
		return g
	}
	mr := 8 // activation rows a block
	switch {
	case s.Experts || M == 1:
		mr = 1
	case M == 2:
		mr = 2
	case M <= 4:
		mr = 4
	}
	if mr == 1 && fastQuant && !chunked {
		mr = 2 // (one row on the rows kernel: its stores skip the missing second)
	}
	gy, gz := (M+mr-1)/mr, max(s.Slots, 1)
	if s.Experts {
		gy = M
	}
	switch {
	case fastQuant && s.Aligned:
		// 4 warps take 16 rows (qgemv_rows); one row: row groups of lanes
		// split K over 8 rows.
		name, nr := fmt.Sprintf("qgemv%d_%s_%d", w.Bits, w.scaleName(), mr), 16
		if mr == 1 {
			name += RowGroupSuffix(K, w.Bits)
			nr = 8 * 128 / RowGroupLanes(K, w.Bits)
		}
		return GEMV{Kind: GEMVRows, Kernel: name, GridX: (N + nr - 1) / nr, GridY: gy, GridZ: gz, Block: 128}
	case !w.Quant && s.Aligned && K%(16/w.ElemBytes) == 0:
		// A block of 8 warps takes 4 rows, the warps splitting K.
		return GEMV{Kind: GEMVRows, Kernel: fmt.Sprintf("dgemv_%s_%d", w.Dense, mr), GridX: (N + 3) / 4, GridY: gy, GridZ: gz, Block: 256}
	}
	// One warp a row, 4 a block, 8 activation rows a block.
	if !s.Experts {
		gy = (M + 7) / 8
	}
	name := "qgemvgen_" + w.scaleName()
	if !w.Quant {
		name = "dgemvs_" + w.Dense
	}
	return GEMV{Kind: GEMVGeneric, Kernel: name, GridX: (N + 3) / 4, GridY: gy, GridZ: gz, Block: 128}
}

// RowGroupLanes mirrors the kernels' row groups (gemv.cu): rows of fewer
// than 96 16-byte chunks are split over 64 or 32 lanes instead of the
// block's 128, so a block takes 2 or 4 groups of 8 rows and every lane
// loads.
func RowGroupLanes(K, bits int) int {
	switch nc := K * bits / 128; {
	case nc >= 96:
		return 128
	case nc > 32:
		return 64
	}
	return 32
}

// RowGroupSuffix names the kernel form for RowGroupLanes.
func RowGroupSuffix(K, bits int) string {
	if l := RowGroupLanes(K, bits); l < 128 {
		return fmt.Sprintf("_g%d", l)
	}
	return ""
}
