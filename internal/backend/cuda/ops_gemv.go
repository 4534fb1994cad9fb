//go:build linux

package cuda

import (
	"fmt"
	"strings"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
)

// One-row and few-row quantized products (the GEMV kernels of gemv.cu and
// mma.cu) and what folds into them at record time: q/k/v and gate/up
// launched together, and the gated activation.

// gemv records y[M,N] = x[M,K] @ W^T for M <= 8 per row chunk (grid.y
// covers more). With eidx != 0, row t uses expert eidx[t*topk+slot]; a
// negative slot runs all topk slots in one launch (grid.z, see rebase in
// gemv.cu).
func (b *Backend) gemv(y, x uintptr, w *weight, bias uintptr, M, ldy, ldx int, eidx uintptr, topk, slot int) {
	sh := plan.GEMVShape{M: M, Experts: eidx != 0, Slots: 1, XAligned: x%16 == 0, Aligned: x%16 == 0 && ldx%4 == 0, MMA: !b.mmaOff, SMs: b.SMs, Clusters: b.Tuning.Clusters}
	if eidx != 0 && slot < 0 {
		sh.Slots = topk
	}
	g := plan.PlanGEMV(w.plan(), sh)
	N, K := w.out, w.in
	switch g.Kind {
	case plan.GEMVMulti:
		b.gemvMulti(y, x, w, bias)
		return
	case plan.GEMVTensorCore:
		l := b.newLaunch(g.Kernel, g.GridX, g.GridY, g.GridZ, g.Block).p(y).p(x).p(w.w).p(w.sb).p(bias).
			i(N).i(K).i(M).i(w.gshft).i(ldy).i(ldx).p(0).i(0).i(0).i64(0).i64(0)
		l.cz = uint32(g.Cluster)
		return
	}
	// Strides between experts, in u32 words of weights and of scales.
	wstride, sbstride := N*K*w.dtype.Size()/4, 0
	if w.quant {
		wstride, sbstride = expertStrides(w)
	}
	l := b.newLaunch(g.Kernel, g.GridX, g.GridY, g.GridZ, g.Block).p(y).p(x).p(w.w).p(w.sb).p(bias).i(N).i(K).i(M).i(w.gshft).
		i(ldy).i(ldx).p(eidx).i(topk).i(slot).i64(wstride).i64(sbstride)
	if w.quant && g.Kind == plan.GEMVGeneric {
		l.i(w.bits)
	}
}

// plan describes w for the product planners.
func (w *weight) plan() plan.Weight {
	return plan.Weight{N: w.out, K: w.in, Quant: w.quant, Bits: w.bits, GroupShift: w.gshft, ScalesF32: w.sbF32, FP: w.fp, FPPair: w.fpPair,
		ElemBytes: w.dtype.Size(), Dense: dense(w.dtype)}
}

// Argument slots of the qgemvm (multi-matrix) kernel.
const (
	mX, mK, mGshift      = 0, 1, 2
	mSeg0, mSegLen       = 3, 5 // y, w, sb, bias, N per matrix
	mNB0, mNB1, mGLU, mD = 18, 19, 20, 21
	multiRows            = 8 // MULTI_NR
)

// actCode is a gated activation's code in the kernels (gate_act in
// kernels/common.cu).
func actCode(act backend.Activation) int {
	switch act {
	case backend.SiLU:
		return 1
	case backend.GELUTanh:
		return 2
	case backend.GELU:
		return 3
	}
	panic(fmt.Sprintf("cuda: unknown activation %v", act))
}

// gatedKernel is the elementwise kernel of a gated activation.
func gatedKernel(act backend.Activation) string {
	return [...]string{1: "gated_silu", 2: "gated_gelu", 3: "gated_gelu_erf"}[actCode(act)]
}

// multiKernels are the qgemvm kernels: by bits and scale type, with their
// row-group forms for short rows (_g64, _g32).
var multiKernels = []string{"qgemvm4_bf", "qgemvm4_f32", "qgemvm8_bf", "qgemvm8_f32",
	"qgemvm4_bf_g64", "qgemvm4_f32_g64", "qgemvm8_bf_g64", "qgemvm8_f32_g64",
	"qgemvm4_bf_g32", "qgemvm4_f32_g32", "qgemvm8_bf_g32", "qgemvm8_f32_g32",
	"qgemvm4_fp", "qgemvm8_fp", "qgemvm4_fp_g64", "qgemvm8_fp_g64", "qgemvm4_fp_g32", "qgemvm8_fp_g32",
	"qgemvm4_fp2", "qgemvm4_fp2_g64", "qgemvm4_fp2_g32"}

// multiRowsOf is the rows a block of qgemvm kernel name takes: 8 times
// the row groups a block (128 / lanes a group).
func multiRowsOf(name string) int {
	switch {
	case strings.Contains(name, "_g64"):
		return 2 * multiRows
	case strings.Contains(name, "_g32"):
		return 4 * multiRows
	}
	return multiRows
}

// gemvMulti records a one-row quantized product. When the previous launch
// is a product of the same x with the same kind of weight (a layer's q, k
// and v, or gate and up), the matrix joins that launch instead: one launch
// streams all of them, so the small k and v matrices no longer each pay a
// launch and a tail.
func (b *Backend) gemvMulti(y, x uintptr, w *weight, bias uintptr) {
	d := b.defaultMulti(w)
	nb := (w.out + d.rows - 1) / d.rows
	if n := len(b.rec.ls); n > 0 {
		l := &b.rec.ls[n-1]
		if l.fn == d.fn && uintptr(l.args[mX]) == x && int(int32(l.args[mK])) == w.in && int(int32(l.args[mGshift])) == w.gshft &&
			l.args[mGLU] == 0 && l.args[mSeg0+2*mSegLen] == 0 && y != x {
			seg := 1
			if l.args[mSeg0+mSegLen] != 0 {
				seg = 2
			}
			for i := 0; i < seg; i++ {
				if uintptr(l.args[mSeg0+i*mSegLen]) == y {
					seg = -1 // same output twice: keep the order, do not merge
					break
				}
			}
			if seg > 0 {
				o := mSeg0 + seg*mSegLen
				l.args[o], l.args[o+1], l.args[o+2], l.args[o+3] = uint64(y), uint64(w.w), uint64(w.sb), uint64(bias)
				l.args[o+4] = uint64(uint32(int32(w.out)))
				if seg == 1 {
					l.args[mNB1] = uint64(nb)
				}
				l.gx += uint32(nb)
				return
			}
		}
	}
	l := b.newLaunchFn(d.fn, d.name, nb, 1, 1, 128).p(x).i(w.in).i(w.gshft).p(y).p(w.w).p(w.sb).p(bias).i(w.out)
	for range 2 { // matrices 1 and 2: none until a product joins the launch
		l.p(0).p(0).p(0).p(0).i(0)
	}
	l.i(nb).i(0).i(0).p(0)
}

// multiInfo describes a qgemvm kernel: its name, rows a block and
// handle. Recording runs for every decode step while the device waits, so
// the peepholes' questions about a launch's kernel are answered from maps
// built once (multiOf, defaultMulti): looping over multiKernels with name
// concatenation and map lookups cost ~60 of the ~120 us a Llama-3.1-8B
// step took to record (BenchmarkRecordDecodeStep).
type multiInfo struct {
	name string
	rows int
	fn   uintptr
}

// multiOf reports the qgemvm kernel fn is, if it is one.
func (b *Backend) multiOf(fn uintptr) (multiInfo, bool) {
	if b.multiByFn == nil {
		b.multiByFn = map[uintptr]multiInfo{}
		for _, c := range multiKernels {
			b.multiByFn[b.fn(c)] = multiInfo{name: c, rows: multiRowsOf(c), fn: b.fn(c)}
		}
	}
	mi, ok := b.multiByFn[fn]
	return mi, ok
}

// defaultMulti is the qgemvm kernel for w's bits, scale type and row
// length (row groups for short rows) and its rows a block, memoized. The
// memo is indexed [bits 4 or 8][bf16, f32, fp or fp2 scales][128, 64 or
// 32 lanes a row group] (gemv sends only 4 and 8 bits here).
func (b *Backend) defaultMulti(w *weight) multiInfo {
	lanes := plan.RowGroupLanes(w.in, w.bits)
	bi, si, li := 0, 0, 0
	switch lanes {
	case 64:
		li = 1
	case 32:
		li = 2
	}
	if w.bits == 8 {
		bi = 1
	}
	if w.sbF32 {
		si = 1
	}
	if w.fp {
		si = 2
	}
	if w.fpPair {
		si = 3
	}
	mi := &b.multiDefaults[bi][si][li]
	if mi.name == "" {
		name := fmt.Sprintf("qgemvm%d_%s", w.bits, w.sbName()) + plan.RowGroupSuffix(w.in, w.bits)
		*mi = multiInfo{name: name, rows: multiRows * 128 / lanes, fn: b.fn(name)}
	}
	return *mi
}

// fuseGLU turns a just-recorded two-matrix product of gate and up into the
// kernel that also writes act(gate)*up to dst. It reports whether it did.
func (b *Backend) fuseGLU(d, g, u *Tensor, act backend.Activation) bool {
	n := len(b.rec.ls)
	if n == 0 || g.rows != 1 {
		return false
	}
	l := &b.rec.ls[n-1]
	name, nr := "", 8 // nr: rows of each matrix per block
	if mi, ok := b.multiOf(l.fn); ok {
		name, nr = mi.name, mi.rows
	}
	s0, s1 := mSeg0, mSeg0+mSegLen
	if name == "" || l.args[mGLU] != 0 || l.args[s1+mSegLen] != 0 || uintptr(l.args[s0]) != g.ptr || uintptr(l.args[s1]) != u.ptr ||
		l.args[s0+4] != l.args[s1+4] || int(int32(l.args[s0+4])) != g.cols {
		return false
	}
	l.args[mGLU], l.args[mD] = uint64(actCode(act)), uint64(d.ptr)
	l.gx = uint32((g.cols + nr/2 - 1) / (nr / 2))
	return true
}
