//go:build linux

package cuda

import (
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
)

// Grouped expert GEMM for MoE steps with many tokens (kernels/moe.cu).
// The per-token path in MoE reads each chosen expert's weights once per
// token; a prefill chunk of hundreds of tokens then re-reads every expert
// tens of times per layer. Here the (token, slot) pairs are sorted by
// expert on the device and each expert's weights are read once per tile
// of moeTile rows, on the tensor cores (qmma4_impl, 4-bit weights:
// affine, mxfp4 and nvfp4).

const (
	moeYS   = 4    // MOE_YS in moe.cu: blocks a tile in moe_gather and moe_act
	moeTile = 32   // MOE_TILE in moe.cu: rows per tile
	moeMaxE = 1024 // MOE_MAXE: experts moe_align can count
)

// moeGEMMApplies reports whether the grouped path can run this MoE call:
// enough tokens, 4-bit experts the tiles read (moeTiled), gate and up
// quantized alike (one launch runs both), widths that are multiples of
// 64, and sizes within the kernels' grids.
func (b *Backend) moeGEMMApplies(s *Tensor, gw, uw, dw *weight, E, topk int) bool {
	T, hidden, inter := s.rows, s.cols, gw.out
	if T < plan.MoEGEMMFrom(b.Tuning, E, topk, gw.fp) || E > moeMaxE || hidden%64 != 0 || inter%64 != 0 || s.ptr%16 != 0 {
		return false
	}
	for _, w := range []*weight{gw, uw, dw} {
		if !moeTiled(w) || w.experts != E {
			return false
		}
	}
	if uw.out != inter || uw.in != hidden || uw.group != gw.group || uw.sbName() != gw.sbName() {
		return false
	}
	return moeMaxTiles(T*topk, E) <= 65535 // grid.y
}

// moeTiled reports whether moe_qmma4 reads w's layout: 4-bit affine
// experts with groups of 64 or more (qmma4's layout), or E2M1 codes with
// a scale word a group of 32 (mxfp4) or a pair of groups of 16 (nvfp4;
// both gshft 5), whose two words a 64-wide slab the SBmx kernels load
// together. mxfp8's byte codes and affine groups of 32 take moeGrouped.
func moeTiled(w *weight) bool {
	if !w.quant || w.bits != 4 {
		return false
	}
	if w.fp {
		return w.gshft == 5
	}
	return w.gshft >= 6
}

// moeMaxTiles bounds the tiles of P pairs over E experts: each expert's
// run is padded to a multiple of moeTile, at most moeTile-1 rows more
// than its count, and every tile holds at least one real pair.
func moeMaxTiles(P, E int) int {
	return min(P, (P+E*(moeTile-1))/moeTile)
}

// moeGEMM runs the whole MoE op on the grouped path: router GEMV over rs
// (s for plain MoE), routing (as MoE does, then the expert scales when
// set), then moe.cu's pipeline, with the extras' biases and clamped
// SwiGLU in moe_act and moe_unsort_sum (ex.gemmTakes). Scratch is sized
// for the worst case from the step arena, so nothing waits for the device.
func (b *Backend) moeGEMM(d, s, rs *Tensor, rw, gw, uw, dw *weight, p backend.MoEParams, ex moeExtras) {
	T, hidden, E, inter, topk := s.rows, s.cols, rw.out, gw.out, p.TopK
	P := T * topk
	tiles := moeMaxTiles(P, E)
	rows := tiles * moeTile
	alloc := func(n int) uintptr {
		ptr, err := b.arenaAlloc(n)
		if err != nil {
			b.fail(err)
		}
		return ptr
	}
	logits, idx, wts := alloc(T*E*4), alloc(P*4), alloc(P*4)
	sorted, inv, tileE, ntiles := alloc(rows*4), alloc(P*4), alloc(tiles*4), alloc(4)
	// xs holds the gathered rows, then (once gate and up have read it)
	// down's output rows; g takes act(gate)*up in place.
	xs, g, u := alloc(rows*hidden*4), alloc(rows*inter*4), alloc(rows*inter*4)
	if b.err != nil {
		return
	}
	// Router and routing as in MoE: f32 logits off the tensor cores, so
	// the top-k choice agrees with the reference. One GEMV launch covers
	// all rows (grid.y).
	b.mmaOff = true
	b.gemv(logits, rs.ptr, rw, ex.routerBias, T, E, hidden, 0, 0, 0)
	b.mmaOff = false
	renorm := 0
	if p.Renorm {
		renorm = 1
	}
	b.newLaunch("moe_route_w", T, 1, 1, 32).p(logits).i(T).i(E).i(topk).i(renorm).p(idx).p(wts)
	b.moeScaleWeights(wts, idx, ex.scale, P)

	b.newLaunch("moe_align", 1, 1, 1, 1024).p(idx).i(P).i(E).p(sorted).p(inv).p(tileE).p(ntiles)
	b.newLaunch("moe_gather", tiles, moeYS, 1, min(256, roundUp(hidden/4, 32))).p(xs).p(s.ptr).p(sorted).p(tileE).p(ntiles).
		i(topk).i(hidden)
	b.moeQMMA(g, u, xs, gw, uw, tileE, ntiles, tiles)
	act, bdt := moeClamped, ex.gateBias.dt|ex.upBias.dt // (gemmTakes: equal where both are set)
	if !ex.clamped {
		act = actCode(p.Act)
	}
	b.newLaunch("moe_act", tiles, moeActBlocks(inter), 1, 256).p(g).p(u).p(tileE).p(ntiles).i(inter).i(act).p(ex.gateBias.ptr).
		p(ex.upBias.ptr).i(bdt).f(p.Alpha).f(p.Limit)
	b.moeQMMA(xs, 0, g, dw, nil, tileE, ntiles, tiles)
	cb := min(256, roundUp(hidden, 32))
	b.newLaunch("moe_unsort_sum", T, (hidden+cb-1)/cb, 1, cb).p(d.ptr).p(xs).p(wts).p(inv).i(topk).i(hidden).
		p(idx).p(ex.downBias.ptr).i(ex.downBias.dt)
}

// moeQMMA records y0 = x @ w0^T (and y1 = x @ w1^T when w1 is set, same
// shape and quantization) per tile, with the tile's expert. The scale
// stride counts u32 words: K>>gshft a row (a word a group, mxfp4; a word
// a pair of groups, nvfp4's gshft 5), twice that for f32 scale pairs.
func (b *Backend) moeQMMA(y0, y1, x uintptr, w0, w1 *weight, tileE, ntiles uintptr, tiles int) {
	N, K := w0.out, w0.in
	wstride := N * w0.wordsPerRow()
	sbstride := N * (K >> w0.gshft)
	if w0.sbF32 {
		sbstride *= 2 // float2 per group, counted in u32
	}
	gz := 1
	var w1w, w1sb uintptr
	if w1 != nil {
		gz, w1w, w1sb = 2, w1.w, w1.sb
	}
	gshift := w0.gshft
	if w0.fp {
		gshift = 6 // SBmx: a slab's two scale words are one raw value
	}
	b.newLaunch("moe_qmma4_"+w0.sbName(), (N+31)/32, tiles, gz, 256).p(y0).p(y1).p(x).p(w0.w).p(w0.sb).p(w1w).p(w1sb).
		p(tileE).p(ntiles).i(N).i(K).i(gshift).i64(wstride).i64(sbstride)
}

// moeActBlocks is moe_act's blocks a tile (grid y) for rows of inter
// elements: about 8 elements a thread of a full tile (32 rows, 256
// threads a block), at least moeYS. With moeYS alone a 64-sequence step of
// gpt-oss-20b (inter 2880, ~40 tiles) ran 160 blocks of ~90 serial
// iterations each: 64 us a layer, 1.5 of its 22.8 ms profiled (s19d).
func moeActBlocks(inter int) int {
	return min(max((moeTile*inter+256*8-1)/(256*8), moeYS), 64)
}
