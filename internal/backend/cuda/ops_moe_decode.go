//go:build linux

package cuda

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// MoE for steps of fewer than plan.MoEDecodeMaxTokens tokens in three launches
// (kernels/moe_decode.cu) instead of the grouped path's seven (router
// GEMV, moe_route_w, gate, up, gated activation, down, moe_sum):
//
//	moe_router*   grid (E row blocks, T): logits, then the last block of
//	              each token routes it with all its threads (softmax
//	              top-k as moe_route_w)
//	moe_gateup*   grid (inter row blocks, T, topk): act(gate)*up per slot
//	moe_down_sum* grid (hidden row blocks, T, topk): down per slot, the
//	              last slot block of each (token, row block) sums the slots
//	moe_down_acc* (topk 8-16, for down_sum): grid
//	              (hidden blocks of 8 rows, T), each block every slot of its
//	              rows, its 8 warps a slot each at a time, summed in shared memory
//
// Each has an _x form with gpt-oss's extras (router bias; gate/up biases
// and the clamped SwiGLU; down bias), taken per stage when the call has
// that stage's extras (moeDecXTakes), so the other families' kernels are
// the same code as before.
//
// A batch-1 decode step of Qwen3-30B-A3B runs 48 MoE layers of a few
// microseconds of weight reads each, so every launch removed (a ramp and a
// tail) is a visible share of the layer. Which of these won, and by how
// much, is in docs/cuda.md.

// moeDecodeMaxE is the most experts the routing in moe_router handles
// (MD_MAXE, as moe_route_w).
const moeDecodeMaxE = 1024

// mdRows is MD_NR: weight rows per row group in the moe_decode kernels
// (the gate/up kernel takes half of them from each matrix).
const mdRows = 8

// moeDecQuant reports whether w is a quantized matrix the kernels take:
// 4 or 8 bits, rows of whole 16-byte chunks each inside one group.
func moeDecQuant(w *weight) bool {
	return w.quant && (w.bits == 4 || w.bits == 8) && (w.in*w.bits/32)%4 == 0 && w.group >= 128/w.bits
}

// moeDecName names the kernel of a stage for weight w with K-long rows,
// and returns its row-group width (rowGroupLanes). Dense bf16 weights (the
// router only) count 16 bits per element.
func moeDecName(stage string, w *weight) (string, int) {
	bits := w.bits
	name := fmt.Sprintf("moe_%s%d_%s", stage, bits, w.sbName())
	if !w.quant {
		bits = 16
		name = "moe_" + stage + "_bf16"
	}
	return name + plan.RowGroupSuffix(w.in, bits), plan.RowGroupLanes(w.in, bits)
}

// moeDecKernel is moeDecName memoized by stage, weight (its device
// address: weights live as long as the backend) and x, the _x form with
// gpt-oss's extras (kernels/moe_decode.cu, MDX): it runs three times a
// layer in every decode step's recording, where formatting the names cost
// ~1 us a layer.
func (b *Backend) moeDecKernel(stage string, w *weight, x bool) moeDecVal {
	key := moeDecKey{stage, w.w, x}
	if k, ok := b.moeDecNames[key]; ok {
		return k
	}
	name, lanes := moeDecName(stage, w)
	if stage == "down_acc" { // one form: a warp a slot
		name, lanes = fmt.Sprintf("moe_down_acc%d_%s", w.bits, w.sbName()), 32
	}
	switch {
	case x:
		name += "_x"
	case name == "moe_gateup4_bf" || name == "moe_gateup4_bf_g64":
		name += "_o6" // six blocks an SM (kernels/moe_decode.cu)
	}
	if b.moeDecNames == nil {
		b.moeDecNames = map[moeDecKey]moeDecVal{}
	}
	k := moeDecVal{name, b.fn(name), lanes}
	b.moeDecNames[key] = k
	return k
}

type moeDecKey struct {
	stage string
	w     uintptr
	x     bool
}

type moeDecVal struct {
	name  string
	fn    uintptr
	lanes int
}

// moeDecodeTakes reports whether the three-launch kernels take these
// weights and extras, and which stages run their _x forms (router bias;
// gate/up biases or the clamped SwiGLU; down bias).
func moeDecodeTakes(rw, gw, uw, dw *weight, ex moeExtras) (rx, gx, dx, ok bool) {
	E, hidden, inter := rw.out, gw.in, gw.out
	// Router: quantized 4/8 bits or dense bf16 (what the GEMVs run fast);
	// other kinds keep the GEMV + moe_route_w pair.
	if !moeDecQuant(rw) && (rw.quant || rw.dtype != tensor.BF16 || hidden%8 != 0) {
		return
	}
	// Experts: quantized alike for gate and up (one kernel runs both).
	if !moeDecQuant(gw) || !moeDecQuant(dw) || uw.experts != E || dw.experts != E || uw.out != inter || uw.in != hidden ||
		uw.bits != gw.bits || uw.group != gw.group || uw.sbF32 != gw.sbF32 || uw.fp != gw.fp || !uw.quant {
		return
	}
	rx, gx, dx = ex.routerBias != 0, ex.gateBias.ptr != 0 || ex.upBias.ptr != 0 || ex.clamped, ex.downBias.ptr != 0
	ok = moeDecXTakes(rw, rx) && moeDecXTakes(gw, gx) && moeDecXTakes(uw, gx) && moeDecXTakes(dw, dx)
	return
}

// moeDecode records the MoE op on the three-launch path and reports
// whether it did; when it does not apply nothing is recorded and the
// caller takes the grouped path. The router reads rs (s for plain MoE);
// ex.scale, when set, is the experts' [E] f32 scales, applied to the
// routing weights by moe_scale_w between the router and gate/up (which
// then waits for it: the down kernel reads the ids before its wait and the
// weights after, so both are final when it reads them). gpt-oss's extras
// (biases, the clamped SwiGLU) take each stage's _x kernel (moeDecXTakes).
// res, when set, is a
// [T][hidden] tensor that moe_down_sum adds the result to (for folding
// the model's residual Add; callers pass 0 for now).
func (b *Backend) moeDecode(d, s, rs *Tensor, rw, gw, uw, dw *weight, p backend.MoEParams, ex moeExtras, res uintptr) bool {
	T, hidden, E, inter, topk := s.rows, s.cols, rw.out, gw.out, p.TopK
	if T >= plan.MoEDecodeMaxTokens || E > moeDecodeMaxE || s.ptr%16 != 0 || rs.ptr%16 != 0 || d.ptr == res {
		return false
	}
	rx, gx, dx, ok := moeDecodeTakes(rw, gw, uw, dw, ex)
	if !ok {
		return false
	}
	alloc := func(n int) uintptr {
		ptr, err := b.arenaAlloc(n)
		if err != nil {
			b.fail(err)
		}
		return ptr
	}
	logits, idx, wts := alloc(T*E*4), alloc(T*topk*4), alloc(T*topk*4)
	a := alloc(topk * T * inter * 4)

	downAcc := topk >= 8 && topk <= 16
	down, y := "down_acc", uintptr(0) // moe_down_acc needs no per-slot scratch
	if !downAcc {
		down, y = "down_sum", alloc(topk*T*hidden*4)
	}
	rk, gk, dk := b.moeDecKernel("router", rw, rx), b.moeDecKernel("gateup", gw, gx), b.moeDecKernel(down, dw, dx)
	rl, gl, dl := rk.lanes, gk.lanes, dk.lanes
	rgx := (E + mdRows*128/rl - 1) / (mdRows * 128 / rl)
	ggx := (inter + mdRows/2*128/gl - 1) / (mdRows / 2 * 128 / gl)
	dgx, dgz := (hidden+mdRows*128/dl-1)/(mdRows*128/dl), topk
	if downAcc { // a block of mdRows rows does every slot
		dgx, dgz = (hidden+mdRows-1)/mdRows, 1
	}
	// Tickets: cnt[t] for the router, then cnt[t*dgx+bx] for down_sum's
	// sum (moe_down_acc needs none); each kernel leaves them zero, and the
	// two never run at once (PDL: each touches them after grid_dep_wait).
	cnt := b.counters(max(T, T*dgx))
	if b.err != nil || cnt == 0 {
		return true // the failure is recorded; Sync reports it
	}
	renorm := 0
	if p.Renorm {
		renorm = 1
	}
	l := b.newLaunchFn(rk.fn, rk.name, rgx, T, 1, 128).p(rs.ptr).p(rw.w).p(rw.sb).i(E).i(hidden).i(rw.gshft).p(logits).p(cnt).
		i(topk).i(renorm).p(idx).p(wts)
	if rx {
		l.p(ex.routerBias)
	}
	b.moeScaleWeights(wts, idx, ex.scale, T*topk)

	act := moeClamped
	if !ex.clamped {
		act = actCode(p.Act)
	}
	wstride, sbstride := expertStrides(gw)
	// Gate/up lets the down kernel launch only after the router is done,
	// and the down kernel loads its expert's first weight chunk before
	// its wait.
	l = b.newLaunchFn(gk.fn, gk.name, ggx, T, topk, 128).p(s.ptr).p(gw.w).p(gw.sb).p(uw.w).p(uw.sb).i(inter).i(hidden).i(gw.gshft).
		i64(wstride).i64(sbstride).p(idx).i(topk).i(act).p(a)
	if gx {
		l.p(ex.gateBias.ptr).p(ex.upBias.ptr).i(ex.gateBias.dt).i(ex.upBias.dt).f(p.Alpha).f(p.Limit)
	}

	dthreads := 128
	if downAcc {
		dthreads = 256 // 8 warps, a slot each
	}
	dws, dsbs := expertStrides(dw)
	l = b.newLaunchFn(dk.fn, dk.name, dgx, T, dgz, dthreads).p(d.ptr).p(res).p(y).p(a).p(dw.w).p(dw.sb).i(hidden).i(inter).i(dw.gshft).
		i64(dws).i64(dsbs).p(idx).p(wts).i(topk).p(cnt)
	if dx {
		l.p(ex.downBias.ptr).i(ex.downBias.dt)
	}
	return true
}

// moeDecXTakes reports whether a stage with weight w has its kernel: the
// _x forms (x: the call has that stage's extras) exist for affine and mx
// weights and the dense bf16 router, not for nvfp4 (fpPair) or an mx
// router (kernels/moe_decode.cu).
func moeDecXTakes(w *weight, x bool) bool {
	switch {
	case !x:
		return true
	case w.experts == 1: // the router
		return !w.fp
	}
	return !w.fpPair
}

// expertStrides is the distance between experts of a stacked quantized
// weight, in u32 words of packed weights and of scale pairs.
func expertStrides(w *weight) (wstride, sbstride int) {
	wstride = w.out * w.wordsPerRow()
	sbstride = w.out * (w.in >> w.gshft)
	if w.sbF32 {
		sbstride *= 2 // a float2 per group
	}
	return wstride, sbstride
}
