//go:build linux

package cuda

import (
	"fmt"
	"math"
	"strconv"
	"unsafe"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// Ops record launches; nothing runs until a result is needed (ReadRows,
// Argmax, Sync) or the next BeginStep. Errors are sticky and reported by
// the next Sync or BeginStep: the interface's ops return none.

func (b *Backend) needStep(op string) {
	if !b.inStep {
		panic("cuda: " + op + " needs a batch: call BeginStep first")
	}
}

func dense(d tensor.DType) string {
	switch d {
	case tensor.BF16:
		return "bf16"
	case tensor.F16:
		return "f16"
	}
	return "f32"
}

func (w *weight) sbName() string {
	if w.sbF32 {
		return "f32"
	}
	return "bf"
}

func (b *Backend) Embed(dst backend.Tensor, table backend.Weight) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.needStep("Embed")
	d, w := b.tt(dst), b.wt(table)
	T := b.step.tokens
	if d.rows != T || d.cols != w.in {
		panic(fmt.Sprintf("cuda: Embed into %dx%d from a table of width %d for %d tokens", d.rows, d.cols, w.in, T))
	}
	if T == 0 {
		return
	}
	threads := min(256, roundUp(w.in, 32))
	if w.quant {
		b.newLaunch("embedq_"+w.sbName(), T, 1, 1, threads).p(d.ptr).p(w.w).p(w.sb).p(b.step.tok).p(b.feed.ptr).i(w.in).i(w.bits).i(w.gshft)
		return
	}
	b.newLaunch("embed_"+dense(w.dtype), T, 1, 1, threads).p(d.ptr).p(w.w).p(b.step.tok).p(b.feed.ptr).i(w.in)
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// gemmRows is the row count above which Linear uses cuBLAS (TF32 on f32
// activations) instead of the GEMV kernels, which re-read the weights once
// per 8 rows.
const gemmRows = 32

func (b *Backend) Linear(dst, x backend.Tensor, wt, bias backend.Weight) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, s, w := b.tt(dst), b.tt(x), b.wt(wt)
	if s.cols != w.in || d.cols != w.out || d.rows != s.rows || w.experts != 1 {
		panic(fmt.Sprintf("cuda: Linear %dx%d @ %v^T into %dx%d", s.rows, s.cols, w.shape, d.rows, d.cols))
	}
	var bp uintptr
	if bias != nil {
		bp = b.wt(bias).w
	}
	if s.rows == 0 {
		return
	}
	if s.rows > gemmRows {
		b.gemm(d, s, w, bp)
		return
	}
	b.gemv(d.ptr, s.ptr, w, bp, s.rows, d.cols, s.cols, 0, 0, 0)
}

func (b *Backend) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, s := b.tt(dst), b.tt(x)
	if d.rows != s.rows || d.cols != s.cols {
		panic("cuda: RMSNorm shape mismatch")
	}
	var wp uintptr
	if w != nil {
		wp = b.wt(w).w
	}
	if s.rows == 0 {
		return
	}
	threads := min(1024, max(32, roundUp(s.cols/4, 32)))
	// An Add that wrote x just before: do both in one pass over the row.
	if n := len(b.rec.ls); n > 0 {
		l := &b.rec.ls[n-1]
		if l.fn == b.fn("add_f32") && uintptr(l.args[0]) == s.ptr && int(l.args[3]) == s.rows*s.cols {
			a, c := uintptr(l.args[1]), uintptr(l.args[2])
			b.rec.ls = b.rec.ls[:n-1]
			b.newLaunch("add_rmsnorm", s.rows, 1, 1, threads).p(s.ptr).p(a).p(c).p(d.ptr).p(wp).i(s.cols).f(eps).p(0)
			return
		}
	}
	b.newLaunch("rmsnorm", s.rows, 1, 1, threads).p(d.ptr).p(s.ptr).p(wp).i(s.cols).f(eps).p(0)
}

func (b *Backend) ApplyRoPE(x backend.Tensor, heads, headDim int, r backend.RoPE) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.needStep("ApplyRoPE")
	t := b.tt(x)
	half := r.RotaryDim / 2
	if t.rows != b.step.tokens || t.cols < heads*headDim || r.RotaryDim > headDim || len(r.InvFreq) < half {
		panic(fmt.Sprintf("cuda: ApplyRoPE on %dx%d with %d heads of %d, rotary %d", t.rows, t.cols, heads, headDim, r.RotaryDim))
	}
	if t.rows == 0 || half == 0 {
		return
	}
	scale := r.Scale
	if scale == 0 {
		scale = 1
	}
	tab := b.ropeTable(r.InvFreq[:half])
	// q then k with the same table: one launch rotates both.
	if n := len(b.rec.ls); n > 0 {
		l := &b.rec.ls[n-1]
		if l.fn == b.fn("rope") && uintptr(l.args[2]) == tab && int(l.gx) == t.rows && int(int32(l.args[4])) == headDim &&
			int(int32(l.args[5])) == half && uint32(l.args[6]) == math.Float32bits(scale) && uintptr(l.args[0]) != t.ptr {
			x1, h1, ld1 := uintptr(l.args[0]), int(int32(l.args[3])), int(int32(l.args[7]))
			b.rec.ls = b.rec.ls[:n-1]
			b.newLaunch("rope2", t.rows, h1+heads, 1, min(128, roundUp(half, 32))).p(x1).i(h1).i(ld1).p(t.ptr).i(t.cols).
				p(b.step.pos).p(tab).i(headDim).i(half).f(scale)
			return
		}
	}
	b.newLaunch("rope", t.rows, heads, 1, min(128, roundUp(half, 32))).p(t.ptr).p(b.step.pos).p(tab).i(heads).i(headDim).
		i(half).f(scale).i(t.cols)
}

// ropeTable uploads an inverse-frequency table once per distinct content.
func (b *Backend) ropeTable(f []float32) uintptr {
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
	if p, ok := b.ropeTabs[string(raw)]; ok { // (a lookup by string(raw) allocates nothing)
		return p
	}
	key := string(raw)
	defer b.bind()()
	b.flush() // the copy below is synchronous; keep recorded order
	p, err := b.allocPersistent(4 * len(f))
	if err == nil {
		err = b.htod(p, unsafe.Pointer(&f[0]), 4*len(f))
	}
	if err != nil {
		b.fail(err)
		return 0
	}
	b.ropeTabs[key] = p
	return p
}

func (b *Backend) Attention(dst, q, k, v backend.Tensor, kv backend.KVStore, layer int, p backend.AttnParams) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.needStep("Attention")
	st, ok := kv.(*kvStore)
	if !ok {
		panic(fmt.Sprintf("cuda: KV store of type %T is not from the cuda backend", kv))
	}
	o, qt, kt, vt := b.tt(dst), b.tt(q), b.tt(k), b.tt(v)
	T := b.step.tokens
	if qt.rows != T || kt.rows != T || vt.rows != T || o.rows != T || p.KVHeads <= 0 || p.Heads%p.KVHeads != 0 ||
		qt.cols < p.Heads*p.HeadDim || kt.cols < p.KVHeads*p.HeadDim || p.HeadDim > 512 ||
		layer < 0 || layer >= len(st.k) || st.spec.Layers[layer].KVHeads != p.KVHeads || st.spec.Layers[layer].HeadDim != p.HeadDim {
		panic(fmt.Sprintf("cuda: Attention shapes: q %dx%d k %dx%d for %d tokens, params %+v", qt.rows, qt.cols, kt.rows, kt.cols, T, p))
	}
	if T == 0 {
		return
	}
	bs := st.spec.BlockSize
	kvw := p.KVHeads * p.HeadDim
	dense := qt.cols == p.Heads*p.HeadDim && o.cols == p.Heads*p.HeadDim
	// Decode steps of head dims 64/128: attn_decode serves a kv head's
	// whole query group and stores this step's K/V itself.
	dec := b.step.decode && kt.cols == vt.cols && kt.cols == kvw && dense &&
		(p.HeadDim == 64 || p.HeadDim == 128) && p.Heads/p.KVHeads <= 8
	if dec {
		// About decSplitKeys keys per split block, by the longest context
		// rounded up to a power of two (so the launch, and its graph,
		// repeats until the context doubles), at most enough blocks to
		// fill the device twice (decWaves): the last block merges the splits, and
		// 33 splits at 192 keys measured 20 us a call against ~8 us for
		// the generic kernel's 9.
		ctx := 64
		for ctx < b.step.maxCtx {
			ctx *= 2
		}
		G := p.Heads / p.KVHeads
		gl := G // query heads per block (head groups: decHeadsPerBlock, one-token steps)
		if T == 1 && b.decHeads > 0 && b.decHeads < G && G%b.decHeads == 0 && ctx <= b.decHeadsMaxCtx {
			gl = b.decHeads
		} else if lh := longHeads(b.decLongHeads, ctx); T == 1 && ctx > b.decHeadsMaxCtx && G > 4 && lh > 0 && lh < G && G%lh == 0 {
			gl = lh // e.g. Qwen3's groups of 8 as blocks of 2 or 4 (longHeads)
		}
		hb := T * p.KVHeads * (G / gl) // blocks per split
		// small: the _h1/_h2/_h4 kernels
		small := gl == 1 || gl == 2 || gl == 4
		waves := b.decWaves
		if waves == 0 {
			waves = decodeWaves(small)
		}
		splits := max(1, min(ctx/b.decSplitKeys, 64, (waves*b.SMs+hb-1)/hb))
		// The small kernels' splits merged in a cluster (decClusterMax): only
		// without the q/k write-back, whose tickets the _c kernels do not
		// keep. One-head blocks (short contexts) take at most 17 splits
		// (decodeWaves): 17 are cut to a cluster of 16; otherwise a head
		// group clusters only when its splits fit one.
		cz := 0
		if b.decClusterMax > 0 && p.ScratchQK && small && splits > 1 {
			if gl == 1 && splits <= b.decClusterMax*17/16 {
				splits = min(splits, b.decClusterMax)
			}
			if splits <= b.decClusterMax {
				cz = splits
			}
		}
		// Counters: one per (token, head group) for the splits, then one
		// per (token, kv head) for the head groups.
		part, cnt, ok := b.splitScratch(T*p.Heads, splits, p.HeadDim, hb+T*p.KVHeads)
		if !ok {
			return
		}
		if cnt == 0 && gl < G {
			if cnt = b.counters(hb + T*p.KVHeads); cnt == 0 {
				return
			}
		}
		invf, half, rscale := b.takeRoPE(qt, kt, p)
		qn, kn, neps := b.takeHeadNorms(qt, kt, T, p)
		// Constant names: recorded every layer of every step.
		name := "attn_decode_128"
		if p.HeadDim == 64 {
			name = "attn_decode_64"
		}
		if small {
			name += "_h" + strconv.Itoa(gl)
		}
		wb := 1 // q and k as the unfused rope/norm kernels leave them
		if p.ScratchQK {
			wb = 0
		}
		if cz > 0 {
			name += "c"
		}
		l := b.newLaunch(name, p.KVHeads*(G/gl), T, splits, 128).p(o.ptr).p(part).p(qt.ptr).
			p(st.k[layer]).p(st.v[layer]).p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(bs).
			i(p.Heads).i(p.KVHeads).f(p.Scale).i(p.Window).f(p.Softcap).p(kt.ptr).p(vt.ptr).i(kvw).p(cnt).
			p(invf).i(half).f(rscale).p(qn).p(kn).f(neps).i(gl).i(wb)
		l.cz = uint32(cz)
		return
	}
	b.newLaunch("kv_store", T, 1, 1, min(256, roundUp(kvw, 32))).p(st.k[layer]).p(st.v[layer]).p(kt.ptr).p(vt.ptr).
		p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(bs).i(p.KVHeads).i(p.HeadDim)
	// Prefill chunks: tensor-core flash attention over query tiles
	// (flash2_attn_*, dynamic shared memory; the generic kernel where the
	// device refused it). At head dim 512 two blocks of 64 rows serve each
	// query tile.
	if !b.step.decode && b.step.maxLen >= 16 && b.step.consecutive && b.flash2[p.HeadDim] && dense {
		threads, rows, _, _ := flash2Geom(p.HeadDim)
		name, smem, grid := fmt.Sprintf("flash2_attn_%d", p.HeadDim), flash2Smem(p.HeadDim), b.step.ntiles*(flashTile/rows)
		l := b.newLaunch(name, grid, p.Heads, 1, threads).p(o.ptr).p(qt.ptr).
			p(st.k[layer]).p(st.v[layer]).p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(bs).
			i(p.Heads).i(p.KVHeads).f(p.Scale).i(p.Window).f(p.Softcap).p(b.step.tiles).i(qt.cols).i(o.cols)
		l.smem = uint32(smem)
		return
	}
	// The generic kernel, split as above; the last split block of each
	// (token, head) merges.
	splits := 1
	if work := T * p.Heads; work < 2*b.SMs {
		splits = min(32, (2*b.SMs+work-1)/work)
	}
	part, cnt, ok := b.splitScratch(T*p.Heads, splits, p.HeadDim, T*p.Heads)
	if !ok {
		return
	}
	b.newLaunch("attention", p.Heads, T, splits, 128).p(o.ptr).p(part).p(qt.ptr).p(st.k[layer]).p(st.v[layer]).
		p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(bs).i(p.Heads).i(p.KVHeads).i(p.HeadDim).
		f(p.Scale).i(p.Window).f(p.Softcap).p(cnt)
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

// decHeadsPerBlock is attn_decode's default number of query heads per
// block (MLXCEL_CUDA_DECHEADS overrides it; 0 keeps a kv head's whole
// group in one block): a group larger than this is split over blocks.
// Measured on the H200 (notes/cuda-kernels.md): Qwen3-30B-A3B (8 query
// heads per kv head) decodes at 288-291 tok/s with 2 or 4 against 243
// with 8; Llama-3.1-8B (4) through the ops 380 (2) and 386 (1) against 379.
// Seventh session, with the heads fold: Qwen3 314-325 tok/s with 1
// against 299-320 with 2; Llama unchanged within noise (393/373 against
// 388/380).
// Only one-token steps take groups: at 16 sequences the launch is already
// 128 blocks wide, and serving at concurrency 16 fell from 1847 to
// 1669-1705 tok/s with them.
const decHeadsPerBlock = 1

// decHeadsMaxCtx is the longest context (rounded up to a power of two) at
// which one-token steps take head groups by default; an explicit
// MLXCEL_CUDA_DECHEADS applies at every length. They were measured at
// contexts of ~264 tokens, where the splits alone leave the device short
// of blocks. At long contexts the splits fill it (up to 64 a kv head), and
// a block serving its kv head's whole group reads each K/V row once,
// where groups of one head re-read it G times and, with fewer splits
// (the grid is capped at two blocks an SM), walk several times as many
// keys each (not yet measured on the H200).
const decHeadsMaxCtx = 1024

// longHeads is the number of query heads a one-token step's block serves
// past decHeadsMaxCtx when a kv head's group is larger than the _h4
// kernel takes whole (Qwen3-30B-A3B's 8; Llama's 4 stay whole): set (MLXCEL_CUDA_DECLONGHEADS; 0: the whole group), or by the
// context, rounded up to a power of two, when set < 0 (the default). The
// group then runs on the _h2/_h4 kernels (102/121 registers, 4 blocks an
// SM) rather than the general one (164-200 registers, 2 an SM), reading
// each K/V row G/heads times (the repeats mostly from L2). Qwen3 decode
// tok/s after a prompt of (s10r6/s10r7, same machine):
//
//	heads a block   1024    2048    8192   32768
//	8 (group)          -   213.1   155.8    75.9
//	4              299.0   279.8   206.1   101.3
//	2              369.1   330.2   201.2    79.8
//	1                  -   303.0   155.5    52.3
func longHeads(set, ctx int) int {
	switch {
	case set >= 0:
		return set
	case ctx <= 4096:
		return 2
	}
	return 4
}

// decodeWaves caps attn_decode's grid at that many blocks an SM. The
// one-head _h1 kernel (93 registers: 5 blocks an SM) takes 4: at ~264
// keys Qwen3's and Llama's 32 (kv head, head) blocks then split 17 ways,
// one round of K/V loads each, all issued before the wait (s8r5, same
// machine: Qwen3 396.3 against 388.1 tok/s with 2, Llama 454.3 against
// 449.9). So do the _h2/_h4 kernels (102/121 registers), which serve
// long contexts, past decHeadsMaxCtx: Llama after 8192 prompt tokens
// 215.9 -> 251.6 tok/s, after 32768 93.4 -> 137.3 (s9r2, against the AD_G
// kernel at 2). The AD_G kernels (164-200 registers: 2-3 blocks an SM)
// take 2: with 4, Qwen3 ran at 341-345 against 359-363 (s8r1).
func decodeWaves(small bool) int {
	if small {
		return 4
	}
	return 2
}

// decSplitKeys is attn_decode's default target of keys per split block
// (MLXCEL_CUDA_DECSPLITKEYS overrides it): 4 warps take 4 keys each per
// round of loads, so 16 keys is one round. Measured at 192 keys (Llama-3.1-8B
// shapes, decode through the ops): 16 keys 368.8 tok/s, 32 360.5, 64 349.9,
// one split 270.6.
const decSplitKeys = 16

// splitScratch takes the partial results of rows (token, head) outputs of
// head dim hd split `splits` ways from the step arena, and nctr zeroed
// merge counters; nothing when there is one split. ok is false after a
// failure, which it records.
func (b *Backend) splitScratch(rows, splits, hd, nctr int) (part, cnt uintptr, ok bool) {
	if splits <= 1 {
		return 0, 0, true
	}
	part, err := b.arenaAlloc(rows * splits * (hd + 2) * 4)
	if err != nil {
		b.fail(err)
		return 0, 0, false
	}
	if cnt = b.counters(nctr); cnt == 0 {
		return 0, 0, false
	}
	return part, cnt, true
}

// counters returns n zeroed split counters for the decode attention
// kernel, which leaves them zero again after each launch.
func (b *Backend) counters(n int) uintptr {
	if n > b.cntN {
		unbind := b.bind()
		err := b.grow(&b.cntBuf, 4*n)
		unbind()
		if err != nil {
			b.fail(err)
			return 0
		}
		b.cntN = b.cntBuf.size / 4
		b.fill(b.cntBuf.ptr, 0, b.cntN) // bit pattern 0: integer zeros
	}
	return b.cntBuf.ptr
}

func (b *Backend) elementwise(name string, n int) *launch {
	return b.newLaunch(name, b.gridFor(n), 1, 1, 256)
}

func sameShape(ts ...*Tensor) bool {
	for _, t := range ts[1:] {
		if t.rows*t.cols != ts[0].rows*ts[0].cols {
			return false
		}
	}
	return true
}

func (b *Backend) GatedAct(dst, gate, up backend.Tensor, act backend.Activation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, g, u := b.tt(dst), b.tt(gate), b.tt(up)
	if !sameShape(d, g, u) {
		panic("cuda: GatedAct shape mismatch")
	}
	n := g.rows * g.cols
	if n == 0 {
		return
	}
	name := "gated_silu"
	switch act {
	case backend.SiLU:
	case backend.GELUTanh:
		name = "gated_gelu"
	default:
		panic("cuda: unknown activation")
	}
	if b.fuseGLU(d, g, u, act) {
		return
	}
	b.elementwise(name, n).p(d.ptr).p(g.ptr).p(u.ptr).i64(n).p(0)
}

func (b *Backend) Add(dst, a, c backend.Tensor) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, x, y := b.tt(dst), b.tt(a), b.tt(c)
	if !sameShape(d, x, y) {
		panic("cuda: Add shape mismatch")
	}
	if n := x.rows * x.cols; n > 0 {
		b.elementwise("add_f32", n).p(d.ptr).p(x.ptr).p(y.ptr).i64(n)
	}
}

func (b *Backend) Scale(x backend.Tensor, s float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tt(x)
	if n := t.rows * t.cols; n > 0 {
		b.elementwise("scale_f32", n).p(t.ptr).f(s).i64(n)
	}
}

func (b *Backend) Softcap(x backend.Tensor, c float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tt(x)
	if n := t.rows * t.cols; n > 0 {
		b.elementwise("softcap_f32", n).p(t.ptr).f(c).i64(n)
	}
}

func (b *Backend) GatherLogitRows(dst, src backend.Tensor) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.needStep("GatherLogitRows")
	d, s := b.tt(dst), b.tt(src)
	L := b.step.logitRows
	if d.rows < L || d.cols != s.cols {
		panic(fmt.Sprintf("cuda: GatherLogitRows %d rows into %dx%d", L, d.rows, d.cols))
	}
	if L > 0 {
		b.newLaunch("gather_rows", L, 1, 1, min(256, roundUp(s.cols, 32))).p(d.ptr).p(s.ptr).p(b.step.rows).i(s.cols)
	}
}

// MoE: router GEMV, a routing kernel (softmax, top-k, renorm) that leaves
// expert ids and weights on the device, then the gated MLP of every
// token's chosen experts (GEMVs that pick their expert from the ids),
// summed with the routing weights into dst. Grouped (default): all k slots
// in one launch per projection (grid.z), so a decode step's MoE layer is 7
// launches instead of 2+5k (42 for Qwen3-MoE's k=8, where launches, not
// bytes, set the time: 52 tok/s). MLXCEL_CUDA_MOEGROUP=0: slot by slot.
// Each token still reads its experts' weights on its own (prefill of long
// prompts is slow: no grouped expert GEMM yet).
func (b *Backend) MoE(dst, x backend.Tensor, router backend.Weight, e backend.Experts, p backend.MoEParams) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, s := b.tt(dst), b.tt(x)
	rw, gw, uw, dw := b.wt(router), b.wt(e.Gate), b.wt(e.Up), b.wt(e.Down)
	T, hidden, E, inter := s.rows, s.cols, rw.out, gw.out
	if d.rows != T || d.cols != hidden || rw.in != hidden || gw.experts != E || gw.in != hidden || dw.out != hidden ||
		dw.in != inter || p.TopK < 1 || p.TopK > 16 || p.TopK > E {
		panic(fmt.Sprintf("cuda: MoE shapes: x %dx%d router %v gate %v down %v top-%d", T, hidden, rw.shape, gw.shape, dw.shape, p.TopK))
	}
	if T == 0 {
		return
	}
	if b.moeGEMMApplies(s, gw, uw, dw, E, p.TopK) { // many tokens: grouped expert GEMM (ops_moe.go)
		b.moeGEMM(d, s, rw, gw, uw, dw, p)
		return
	}
	if b.moeDecode(d, s, rw, gw, uw, dw, p, 0) { // few tokens: three launches (ops_moe_decode.go)
		return
	}
	b.moeGrouped(d, s, rw, gw, uw, dw, p)
}

// moeGrouped records the MoE op in seven launches (router GEMV,
// moe_route_w, gate, up, gated activation, down, moe_sum), every slot of
// a step's tokens in each: for the shapes the three-launch path does not
// take.
func (b *Backend) moeGrouped(d, s *Tensor, rw, gw, uw, dw *weight, p backend.MoEParams) {
	T, hidden, E, inter := s.rows, s.cols, rw.out, gw.out
	alloc := func(n int) uintptr {
		ptr, err := b.arenaAllocAny(n)
		if err != nil {
			b.fail(err)
		}
		return ptr
	}
	slots := p.TopK
	logits, idx, wts := alloc(T*E*4), alloc(T*p.TopK*4), alloc(T*p.TopK*4)
	g, u, y := alloc(slots*T*inter*4), alloc(slots*T*inter*4), alloc(slots*T*hidden*4)
	if b.err != nil {
		return
	}
	// The router is a plain GEMV, kept off cuBLAS and off the f16
	// tensor-core path: the top-k choice should see f32 logits.
	b.mmaOff = true
	for r := 0; r < T; r += 8 {
		m := min(8, T-r)
		b.gemv(logits+uintptr(r*E*4), s.ptr+uintptr(r*hidden*4), rw, 0, m, E, hidden, 0, 0, 0)
	}
	b.mmaOff = false
	renorm := 0
	if p.Renorm {
		renorm = 1
	}
	if E <= 1024 {
		b.newLaunch("moe_route_w", T, 1, 1, 32).p(logits).i(T).i(E).i(p.TopK).i(renorm).p(idx).p(wts)
	} else {
		b.newLaunch("moe_route", (T+127)/128, 1, 1, 128).p(logits).i(T).i(E).i(p.TopK).i(renorm).p(idx).p(wts)
	}
	act := "gated_silu"
	if p.Act == backend.GELUTanh {
		act = "gated_gelu"
	}
	b.gemv(g, s.ptr, gw, 0, T, inter, hidden, idx, p.TopK, -1)
	b.gemv(u, s.ptr, uw, 0, T, inter, hidden, idx, p.TopK, -1)
	n := slots * T * inter
	b.elementwise(act, n).p(g).p(g).p(u).i64(n).p(0)
	b.gemv(y, g, dw, 0, T, hidden, inter, idx, p.TopK, -2)
	b.newLaunch("moe_sum", T, 1, 1, min(256, roundUp(hidden, 32))).p(d.ptr).p(y).p(wts).i(T).i(p.TopK).i(hidden)
}

// arenaAllocAny takes op scratch from the step arena. Outside a step the
// arena is simply not rewound until the first BeginStep, which flushes
// everything recorded before it rewinds.
func (b *Backend) arenaAllocAny(n int) (uintptr, error) {
	if b.inStep {
		return b.arenaAlloc(n)
	}
	defer b.bind()()
	return b.arenaAlloc(n)
}

func (b *Backend) ReadRows(x backend.Tensor, out []float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tt(x)
	n := t.rows * t.cols
	if len(out) < n {
		panic(fmt.Sprintf("cuda: ReadRows of %d elements into %d", n, len(out)))
	}
	defer b.bind()()
	b.flush()
	if b.err == nil && n > 0 {
		b.fail(b.dtoh(unsafe.Pointer(&out[0]), t.ptr, 4*n))
	}
	if b.err != nil {
		for i := range out[:n] {
			out[i] = float32(math.NaN())
		}
	}
}

// argmaxSpan is the columns each argmax_split block scans: a 128k-152k
// vocabulary row spreads over 63-75 blocks of 256 threads.
const argmaxSpan = 2048

// argmaxInto records the argmax of each row of t into the feed buffer,
// where FeedTokens read it and ArgmaxAsync copies it from. Rows longer
// than argmaxSpan are split over several blocks (argmax_split), shorter
// ones take one block a row. Call with the context bound.
func (b *Backend) argmaxInto(t *Tensor) error {
	if err := b.grow(&b.feed, 4*t.rows); err != nil {
		return err
	}
	if S := (t.cols + argmaxSpan - 1) / argmaxSpan; S > 1 {
		S = min(S, 128)
		part, err := b.arenaAllocAny(8 * S * t.rows)
		if err != nil {
			return err
		}
		cnt := b.counters(t.rows)
		if cnt == 0 { // counters recorded the failure
			return nil
		}
		b.newLaunch("argmax_split", S, t.rows, 1, 256).p(b.feed.ptr).p(t.ptr).i(t.cols).p(part).p(cnt)
	} else {
		b.newLaunch("argmax_rows", t.rows, 1, 1, 1024).p(b.feed.ptr).p(t.ptr).i(t.cols)
	}
	return nil
}
