//go:build linux

package cuda

import (
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
)

// attnDecode records attn_decode for a decode step as plan.DecodeAttention
// plans it, with the rotation and Qwen3's q/k norms recorded just before
// folded in (takeRoPE, takeHeadNorms). sinks: 0 or [Heads] f32.
func (b *Backend) attnDecode(o, qt, kt, vt *Tensor, st *kvStore, layer int, p backend.AttnParams, sinks uintptr) {
	T := b.step.tokens
	shape := plan.DecodeShape{Tokens: T, Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: p.HeadDim,
		MaxCtx: b.step.maxCtx, ScratchQK: p.ScratchQK}
	if d, ok := plan.DecodeTile(shape, b.Tuning, b.SMs, b.DecClusterMax); ok && b.dtile[st.kern("")][p.HeadDim] {
		b.attnDecodeTile(d, o, qt, kt, vt, st, layer, p, sinks)
		return
	}
	b.attnDecodeSplit(plan.DecodeAttention(shape, b.Tuning, b.SMs), o, qt, kt, vt, st, layer, p, sinks)
}

// attnDecodeShared records attn_decode's _s form for a KV-shared layer's
// decode step (head dims 256 and 512): nothing stored, every key read from
// the cache of layer (the owning layer's, which its call wrote earlier in
// the step). kt and vt are the shape stand-ins at address 0.
func (b *Backend) attnDecodeShared(o, qt, kt *Tensor, st *kvStore, layer int, p backend.AttnParams, sinks uintptr) {
	shape := plan.DecodeShape{Tokens: b.step.tokens, Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: p.HeadDim,
		MaxCtx: b.step.maxCtx, ScratchQK: p.ScratchQK}
	b.attnDecodeSplit(plan.DecodeShared(shape, b.Tuning, b.SMs), o, qt, kt, kt, st, layer, p, sinks)
}

// attnDecodeSplit records the attn_decode launch d plans, with its split
// scratch and counters, and the rotation and head norms folded in.
func (b *Backend) attnDecodeSplit(d plan.Decode, o, qt, kt, vt *Tensor, st *kvStore, layer int, p backend.AttnParams, sinks uintptr) {
	T := b.step.tokens
	part, cnt, ok := b.splitScratch(T*p.Heads, d.Splits, p.HeadDim, d.Counters)
	if !ok {
		return
	}
	if cnt == 0 && d.Counters > 0 { // head groups with one split still count their kv head's groups
		if cnt = b.counters(d.Counters); cnt == 0 {
			return
		}
	}
	invf, half, rscale := b.takeRoPE(qt, kt, p)
	qn, kn, neps := b.takeHeadNorms(qt, kt, T, p)
	wb := 0
	if d.WriteBack { // q and k as the unfused rope/norm kernels leave them
		wb = 1
	}
	l := b.newLaunch(st.kern(d.Kernel), d.GridX, T, d.Splits, 128).p(o.ptr).p(part).p(qt.ptr).
		p(st.k[layer]).p(st.v[layer]).p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(st.spec.BlockSize).
		i(p.Heads).i(p.KVHeads).f(p.Scale).i(p.Window).f(p.Softcap).p(kt.ptr).p(vt.ptr).i(p.KVHeads * p.HeadDim).p(cnt).
		p(invf).i(half).f(rscale).p(qn).p(kn).f(neps).i(d.HeadsPerBlock).i(wb).p(sinks)
	l.cz = uint32(d.Cluster)
}

// attnDecodeTile records attn_dtile (many one-token sequences, the
// tensor-core tile kernel) with the rotation and head norms folded in as
// attnDecode does; it writes q and k back never (DecodeTile requires
// ScratchQK). sinks: 0 or [Heads] f32.
func (b *Backend) attnDecodeTile(d plan.Decode, o, qt, kt, vt *Tensor, st *kvStore, layer int, p backend.AttnParams, sinks uintptr) {
	var part, cnt uintptr
	if d.Counters > 0 {
		var ok bool
		if part, cnt, ok = b.splitScratch(b.step.tokens*p.Heads, d.Splits, p.HeadDim, d.Counters); !ok {
			return
		}
	}
	invf, half, rscale := b.takeRoPE(qt, kt, p)
	qn, kn, neps := b.takeHeadNorms(qt, kt, b.step.tokens, p)
	l := b.newLaunch(st.kern(d.Kernel), d.GridX, b.step.tokens, d.Splits, 128).p(o.ptr).p(part).p(cnt).p(qt.ptr).
		p(st.k[layer]).p(st.v[layer]).p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(st.spec.BlockSize).
		i(p.Heads).i(p.KVHeads).f(p.Scale).i(p.Window).f(p.Softcap).p(kt.ptr).p(vt.ptr).i(p.KVHeads * p.HeadDim).
		p(invf).i(half).f(rscale).p(qn).p(kn).f(neps).p(sinks)
	l.smem = uint32(plan.DecodeTileSmem(p.HeadDim))
	l.cz = uint32(d.Cluster)
}

// takeRoPE folds a just-recorded rope2 of this attention's q and k into
// attn_decode (which rotates both and writes them back): one launch fewer
// per layer and decode step. It returns the rope table, half the rotary
// dim and the cos/sin scale, or a zero table when nothing was folded.
func (b *Backend) takeRoPE(qt, kt *Tensor, p backend.AttnParams) (uintptr, int, float32) {
	n := len(b.rec.ls)
	if n == 0 {
		return 0, 0, 0
	}
	l := &b.rec.ls[n-1]
	arg := func(i int) int { return int(int32(l.args[i])) }
	// rope2's arguments: q, q heads, q stride, k, k stride, pos, table,
	// head dim, half, scale.
	if l.fn != b.fn("rope2") || uintptr(l.args[0]) != qt.ptr || arg(1) != p.Heads || arg(2) != qt.cols ||
		uintptr(l.args[3]) != kt.ptr || arg(4) != kt.cols || arg(7) != p.HeadDim {
		return 0, 0, 0
	}
	half := arg(8)
	if vpl := p.HeadDim / 32; half%vpl != 0 || 2*half > p.HeadDim {
		return 0, 0, 0
	}
	b.rec.ls = b.rec.ls[:n-1]
	return uintptr(l.args[6]), half, math.Float32frombits(uint32(l.args[9]))
}

// takeHeadNorms folds the per-head q and k RMSNorms (Qwen3's q_norm and
// k_norm, in place on the head rows) recorded just before attn_decode
// into it, after takeRoPE took the rotation that followed them: two
// launches fewer per layer and decode step. It returns the q and k norm
// weights (0: not folded) and their eps; folding needs the same eps and
// in-place norms of exactly the q and k rows.
func (b *Backend) takeHeadNorms(qt, kt *Tensor, T int, p backend.AttnParams) (qn, kn uintptr, eps float32) {
	epsSet := false
	for range 2 {
		n := len(b.rec.ls)
		if n == 0 {
			break
		}
		// rmsnorm's arguments: dst, x, w, cols, eps.
		l := &b.rec.ls[n-1]
		dst := uintptr(l.args[0])
		e := math.Float32frombits(uint32(l.args[4]))
		if l.fn != b.fn("rmsnorm") || uintptr(l.args[1]) != dst || int(int32(l.args[3])) != p.HeadDim ||
			l.args[2] == 0 || (epsSet && e != eps) {
			break
		}
		switch {
		case kn == 0 && dst == kt.ptr && int(l.gx) == T*p.KVHeads && kt.cols == p.KVHeads*p.HeadDim:
			kn = uintptr(l.args[2])
		case qn == 0 && dst == qt.ptr && int(l.gx) == T*p.Heads && qt.cols == p.Heads*p.HeadDim:
			qn = uintptr(l.args[2])
		default:
			return qn, kn, eps
		}
		eps, epsSet = e, true
		b.rec.ls = b.rec.ls[:n-1]
	}
	return qn, kn, eps
}
