//go:build linux

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/cudalib"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// Many-row products through cuBLAS (prefill): weights dequantized into a
// scratch buffer, activations rounded to bf16 (or TF32 on f32).

// gemm records a many-row product through cuBLAS: quantized and bf16
// weights on bf16 operands (gemmBF); f32 and f16 weights widened to f32
// into a scratch buffer, then a TF32 GEMM on the f32 activations.
func (b *Backend) gemm(d, s *Tensor, w *weight, bias uintptr) {
	if w.quant || w.dtype == tensor.BF16 {
		b.gemmBF(d, s, w, bias)
		return
	}
	N, K := w.out, w.in
	wp := w.w
	if w.quant || w.dtype != tensor.F32 {
		unbind := b.bind()
		err := b.grow(&b.scratch, N*K*4)
		unbind()
		if err != nil {
			b.fail(err)
			return
		}
		wp = b.scratch.ptr
		n := N * K
		switch {
		case w.quant:
			b.newLaunch("dequant_f32_"+w.sbName(), b.gridFor(n), 1, 1, 256).p(wp).p(w.w).p(w.sb).i(N).i(K).i(w.bits).i(w.gshft)
		case w.dtype == tensor.BF16:
			b.newLaunch("bf16_to_f32", b.gridFor(n), 1, 1, 256).p(wp).p(w.w).i64(n)
		default:
			b.newLaunch("f16_to_f32", b.gridFor(n), 1, 1, 256).p(wp).p(w.w).i64(n)
		}
	}
	b.rec.ls = append(b.rec.ls, launch{fn: fnGemm})
	l := &b.rec.ls[len(b.rec.ls)-1]
	l.p(d.ptr).p(s.ptr).p(wp).i(s.rows).i(N).i(K).i(0)
	b.rec.gemm = true
	if bias != 0 {
		n := s.rows * N
		b.newLaunch("add_bias", b.gridFor(n), 1, 1, 256).p(d.ptr).p(bias).i(s.rows).i(N)
	}
}

// gemmBF records a many-row product on bf16 operands: the weight is
// dequantized to bf16 (dense bf16 weights are used as stored), x is
// rounded to bf16, and cuBLAS multiplies on the tensor cores with f32
// accumulation into the f32 output. Against the TF32 path this halves the
// scratch traffic and doubles the tensor rate; the price is bf16 rounding
// of both operands (conformance bound 1e-2, as for bf16 activations).
func (b *Backend) gemmBF(d, s *Tensor, w *weight, bias uintptr) {
	N, K, M := w.out, w.in, s.rows
	unbind := b.bind()
	xp := b.scratchX.ptr
	err := b.grow(&b.scratchX, M*K*2)
	ready := err == nil && (b.scratchX.ptr == xp && b.bf16Ready(s.ptr, M*K) || b.bf16FromProducer(s.ptr, M*K))
	if err == nil && w.quant {
		err = b.grow(&b.scratch, N*K*2)
	}
	unbind()
	if err != nil {
		b.fail(err)
		return
	}
	wp := w.w
	if w.quant {
		wp = b.scratch.ptr
		b.newLaunch("dequant_bf16_"+w.sbName(), b.gridFor(N*K/8), 1, 1, 256).p(wp).p(w.w).p(w.sb).i(N).i(K).i(w.bits).i(w.gshft)
	}
	if !ready {
		b.convertX(s)
	}
	b.rec.ls = append(b.rec.ls, launch{fn: fnGemm})
	l := &b.rec.ls[len(b.rec.ls)-1]
	l.p(d.ptr).p(b.scratchX.ptr).p(wp).i(M).i(N).i(K).i(1)
	b.rec.gemm = true
	if bias != 0 {
		b.newLaunch("add_bias", b.gridFor(M*N), 1, 1, 256).p(d.ptr).p(bias).i(M).i(N)
	}
}

// convertX records the rounding of x into its bf16 copy in scratchX.
func (b *Backend) convertX(s *Tensor) {
	n := s.rows * s.cols
	b.newLaunch("f32_to_bf16", b.gridFor(n), 1, 1, 256).p(b.scratchX.ptr).p(s.ptr).i64(n)
}

// qmm records a many-row 4-bit product on the fused qmm4 kernels (plan
// q): x's bf16 copy in scratchX (shared with the products before it on
// the same x, or written by its producer), the weights read as stored.
// A product on the same x as the qmm4 launch just recorded (a layer's q,
// k and v, or gate and up) joins it as another segment.
func (b *Backend) qmm(d, s *Tensor, w *weight, bias uintptr, q plan.QMM) {
	N, K, M := w.out, w.in, s.rows
	ready := false
	if b.scratchX.size >= M*K*2 {
		ready = b.bf16Ready(s.ptr, M*K) || b.bf16FromProducer(s.ptr, M*K)
	} else { // a new copy buffer holds nothing yet
		unbind := b.bind()
		err := b.grow(&b.scratchX, M*K*2)
		unbind()
		if err != nil {
			b.fail(err)
			return
		}
		ready = b.bf16FromProducer(s.ptr, M*K)
	}
	if ready && b.joinQMM(d, w, bias, q) {
		return
	}
	var tmap uintptr
	if q.Smem > 0 {
		if tmap = b.bf16RowsMap(b.scratchX.ptr, M, K, q.TileRows); tmap == 0 {
			// No tensor map (slots used up): qmm4's mma.sync forms.
			t := b.Tuning
			t.QMMWarpgroup, t.QMMVariant = false, ""
			q, _ = plan.PlanQMM(w.plan(), M, b.SMs, t)
		}
	}
	if !ready {
		b.convertX(s)
	}
	l := b.newLaunch(q.Kernel, q.GridX, q.GridY, q.Split, q.Threads).p(b.scratchX.ptr).i(K).i(M).i(w.gshft).
		p(d.ptr).p(w.w).p(w.sb).p(bias).i(N)
	for range 2 { // segments 1 and 2: none until a product joins the launch
		l.p(0).p(0).p(0).p(0).i(0)
	}
	l.i(q.GridY).i(q.GridY)
	if q.Smem > 0 { // the warpgroup forms: x's tensor map (QMMW_PARAMS)
		l.p(tmap)
	}
	l.smem = uint32(q.Smem)
	if q.Split > 1 {
		l.cz = uint32(q.Split)
	}
}

// isQMM reports whether fn is one of the qmm4 kernels (x, K, M, gshift,
// segments of (y, ...): a product on the bf16 copy).
func (b *Backend) isQMM(fn uintptr) bool {
	for _, n := range plan.QMMKernels() {
		if fn == b.fns[n] {
			return true
		}
	}
	return false
}

// Argument slots of the qmm4 kernels (QMM_PARAMS).
const (
	qX, qK, qM, qGshift = 0, 1, 2, 3
	qSeg0, qSegLen      = 4, 5 // y, w, sb, bias, N per segment
	qNB1, qNB2          = 19, 20
)

// joinQMM adds the product of w into d to the qmm4 launch just recorded
// when that launch reads the same bf16 x with the same kernel and group
// size and has a free segment; the merged launch is split again for its
// larger grid.
func (b *Backend) joinQMM(d *Tensor, w *weight, bias uintptr, q plan.QMM) bool {
	n := len(b.rec.ls)
	if n == 0 {
		return false
	}
	l := &b.rec.ls[n-1]
	arg := func(i int) int { return int(int32(l.args[i])) }
	if l.fn != b.fn(q.Kernel) || uintptr(l.args[qX]) != b.scratchX.ptr || arg(qK) != w.in || arg(qGshift) != w.gshft ||
		int(l.gx) != q.GridX || l.args[qSeg0+2*qSegLen] != 0 {
		return false
	}
	seg := 1
	if l.args[qSeg0+qSegLen] != 0 {
		seg = 2
	}
	for i := 0; i < seg; i++ {
		if uintptr(l.args[qSeg0+i*qSegLen]) == d.ptr {
			return false // the same output twice: keep the order
		}
	}
	o := qSeg0 + seg*qSegLen
	l.args[o], l.args[o+1], l.args[o+2], l.args[o+3] = uint64(d.ptr), uint64(w.w), uint64(w.sb), uint64(bias)
	l.args[o+4] = uint64(uint32(int32(w.out)))
	if seg == 1 {
		l.args[qNB1] = uint64(l.gy)
	}
	l.gy += uint32(q.GridY)
	l.args[qNB2] = uint64(l.gy)
	if seg == 2 {
		l.args[qNB2] = uint64(l.gy - uint32(q.GridY))
	}
	split := 1
	if b.Tuning.Clusters {
		split = plan.QMMSplit(int(l.gx*l.gy), w.in, b.SMs, q.PerSM)
	}
	l.gz, l.cz = uint32(split), 0
	if split > 1 {
		l.cz = uint32(split)
	}
	return true
}

// bf16Ready reports whether scratchX already holds x (n elements) in
// bf16, looking back over the launches recorded since the copy was made:
// products that read it (a GEMM on scratchX writing elsewhere, its bias
// add, the bf16 dequantization of the next weight, which writes only the
// weight scratch) until the copy's writer, a conversion of x or the
// producer that wrote x with its bf16 copy (bf16FromProducer). Called
// before this product's dequantization is recorded. A layer's q, k and v
// (and gate and up) read the same x, so only the first converts it, or
// none when the norm or activation before them wrote the copy.
func (b *Backend) bf16Ready(x uintptr, n int) bool {
	ls := b.rec.ls
	bias, dqBF, dqF32, dqFP, conv := b.fn("add_bias"), b.fn("dequant_bf16_bf"), b.fn("dequant_bf16_f32"), b.fn("dequant_bf16_fp"), b.fn("f32_to_bf16")
	for i := len(ls) - 1; i >= 0 && i >= len(ls)-16; i-- {
		l := &ls[i]
		if b.isQMM(l.fn) {
			if uintptr(l.args[qX]) != b.scratchX.ptr {
				return false
			}
			for i := range 3 {
				if uintptr(l.args[qSeg0+i*qSegLen]) == x {
					return false
				}
			}
			continue
		}
		switch l.fn {
		case fnGemm: // y, x, w, ...: a product on the copy, not writing x
			if uintptr(l.args[1]) != b.scratchX.ptr || uintptr(l.args[0]) == x {
				return false
			}
		case bias, dqBF, dqF32, dqFP: // write y or the weight scratch
			if uintptr(l.args[0]) == x || uintptr(l.args[0]) == b.scratchX.ptr {
				return false
			}
		case conv: // dst, src, n
			return uintptr(l.args[0]) == b.scratchX.ptr && uintptr(l.args[1]) == x && int(l.args[2]) == n
		default: // the producer with its copy, or anything else
			return b.wroteBF16(l, x, n)
		}
	}
	return false
}

// producerSlots gives, for the launches that can write their output's
// bf16 copy (rmsnorm, add_rmsnorm, gated activations), the output, the
// element count and the dbf argument slot; ok is false for other kernels.
func (b *Backend) producerSlots(l *launch) (dst uintptr, elems, slot int, ok bool) {
	switch l.fn {
	case b.fn("rmsnorm"): // dst, x, w, cols, eps, dbf
		return uintptr(l.args[0]), int(l.gx) * int(int32(l.args[3])), 5, true
	case b.fn("add_rmsnorm"): // sum, a, b, dst, w, cols, eps, dbf
		return uintptr(l.args[3]), int(l.gx) * int(int32(l.args[5])), 7, true
	case b.fn("gated_silu"), b.fn("gated_gelu"), b.fn("gated_gelu_erf"): // d, g, u, n, dbf
		return uintptr(l.args[0]), int(l.args[3]), 4, true
	}
	return 0, 0, 0, false
}

// wroteBF16 reports whether l is a producer that wrote x (n elements) and
// its bf16 copy into scratchX.
func (b *Backend) wroteBF16(l *launch, x uintptr, n int) bool {
	dst, elems, slot, ok := b.producerSlots(l)
	return ok && dst == x && elems == n && uintptr(l.args[slot]) == b.scratchX.ptr
}

// bf16FromProducer makes the launch just recorded, when it is an RMSNorm,
// an add+RMSNorm or a gated activation that writes x (n elements), also
// write x's bf16 copy into scratchX (their dbf argument), and reports
// whether it did: the product then skips its conversion pass, which
// re-read x (a prefill's norm output, or its 14336-wide activation).
func (b *Backend) bf16FromProducer(x uintptr, n int) bool {
	if len(b.rec.ls) == 0 {
		return false
	}
	l := &b.rec.ls[len(b.rec.ls)-1]
	dst, elems, slot, ok := b.producerSlots(l)
	if !ok || dst != x || elems != n || l.args[slot] != 0 {
		return false
	}
	l.args[slot] = uint64(b.scratchX.ptr)
	return true
}

func (b *Backend) runGemm(l *launch) error {
	y, x, w := uintptr(l.args[0]), uintptr(l.args[1]), uintptr(l.args[2])
	m, n, k := int(int32(l.args[3])), int(int32(l.args[4])), int(int32(l.args[5]))
	alpha, beta := float32(1), float32(0)
	in, compute := uintptr(cudalib.CudaR32F), uintptr(cudalib.CublasComputeTF32)
	if l.args[6] == 1 {
		in, compute = cudalib.CudaR16BF, cudalib.CublasCompute32F
	}
	r, _, _ := purego.SyscallN(b.bl.GemmEx, b.bl.Handle, cudalib.CublasOpT, cudalib.CublasOpN, uintptr(n), uintptr(m), uintptr(k),
		uintptr(unsafe.Pointer(&alpha)), w, in, uintptr(k), x, in, uintptr(k),
		uintptr(unsafe.Pointer(&beta)), y, cudalib.CudaR32F, uintptr(n), compute, cudalib.CublasGemmDflt)
	return cudalib.BLASErr(fmt.Sprintf("gemm %dx%dx%d", m, n, k), r)
}
