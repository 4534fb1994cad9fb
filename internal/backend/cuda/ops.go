//go:build linux

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
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
	if w.fpPair {
		return "fp2"
	}
	if w.fp {
		return "fp"
	}
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

// narrowRows is the most output columns a product keeps in f32 whatever
// its row count (Linear).
const narrowRows = 64

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
	// Narrow products (routers, Gated DeltaNet's decay and beta inputs,
	// shared-expert gates) feed exp, softplus, sigmoid or a top-k, where
	// bf16 or f16 rounding of the activations moves the result: they stay
	// on the f32 GEMV at any row count (their weights are a few KB).
	if w.out <= narrowRows && s.rows > 1 {
		b.mmaOff = true
		b.gemv(d.ptr, s.ptr, w, bp, s.rows, d.cols, s.cols, 0, 0, 0)
		b.mmaOff = false
		return
	}
	if q, ok := plan.PlanQMM(w.plan(), s.rows, b.SMs, b.Tuning); ok && w.quant {
		b.qmm(d, s, w, bp, q)
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
	defer b.arenaRelease(b.markArena()) // the split partials die with the op
	st, ok := kv.(*kvStore)
	if !ok {
		panic(fmt.Sprintf("cuda: KV store of type %T is not from the cuda backend", kv))
	}
	o, qt := b.tt(dst), b.tt(q)
	T := b.step.tokens
	// nil k and v (FeatureSharedKV): attend over what layer holds, which
	// its own call wrote earlier in the step; kt and vt stand in at
	// address 0 for the shape checks.
	shared := k == nil && v == nil
	var kt, vt *Tensor
	if shared {
		kt = &Tensor{rows: T, cols: p.KVHeads * p.HeadDim}
		vt = kt
	} else {
		kt, vt = b.tt(k), b.tt(v)
	}
	if qt.rows != T || kt.rows != T || vt.rows != T || o.rows != T || p.KVHeads <= 0 || p.Heads%p.KVHeads != 0 ||
		qt.cols < p.Heads*p.HeadDim || kt.cols < p.KVHeads*p.HeadDim || p.HeadDim > 512 ||
		layer < 0 || layer >= len(st.k) || st.spec.Layers[layer].KVHeads != p.KVHeads || st.spec.Layers[layer].HeadDim != p.HeadDim {
		panic(fmt.Sprintf("cuda: Attention shapes: q %dx%d k %dx%d for %d tokens, params %+v", qt.rows, qt.cols, kt.rows, kt.cols, T, p))
	}
	if st.k[layer] == 0 {
		panic(fmt.Sprintf("cuda: Attention over layer %d, a KV-shared layer with no K/V of its own (pass the owning layer)", layer))
	}
	if T == 0 {
		return
	}
	bs := st.spec.BlockSize
	kvw := p.KVHeads * p.HeadDim
	dense := qt.cols == p.Heads*p.HeadDim && o.cols == p.Heads*p.HeadDim
	var sinks uintptr // [Heads] f32 (a vector weight), 0: none
	if p.Sinks != nil {
		sw := b.wt(p.Sinks)
		if sw.in != p.Heads || sw.out != 1 || sw.dtype != tensor.F32 {
			panic(fmt.Sprintf("cuda: Attention sinks of shape %v for %d heads", sw.shape, p.Heads))
		}
		sinks = sw.w
	}
	// Decode steps of head dims 64 to 512: attn_decode serves a kv head's
	// query group (or part of it) and stores this step's K/V itself (so
	// not for a shared layer's call, which stores nothing).
	if b.step.decode && !shared && kt.cols == vt.cols && kt.cols == kvw && dense && plan.DecodeApplies(p.Heads, p.KVHeads, p.HeadDim) &&
		(p.HeadDim <= 128 || !b.DecGenericWide) {
		b.attnDecode(o, qt, kt, vt, st, layer, p, sinks)
		return
	}
	// A KV-shared layer's decode step at head dims 256/512: attn_decode's
	// _s form, which reads the step's key from the cache too.
	if b.step.decode && shared && dense && plan.SharedDecodeApplies(p.Heads, p.KVHeads, p.HeadDim) && !b.DecGenericWide {
		b.attnDecodeShared(o, qt, kt, st, layer, p, sinks)
		return
	}
	if !shared {
		b.newLaunch(st.kern("kv_store"), T, 1, 1, min(256, roundUp(kvw, 32))).p(st.k[layer]).p(st.v[layer]).p(kt.ptr).p(vt.ptr).
			p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(bs).i(p.KVHeads).i(p.HeadDim)
	}
	// Prefill chunks: tensor-core flash attention over query tiles
	// (flash2_attn_*, dynamic shared memory; the generic kernel where the
	// device refused it). At head dim 512 two blocks of 64 rows serve each
	// query tile.
	if !b.step.decode && b.step.maxLen >= 16 && b.step.consecutive && b.flash2[st.kern("")][p.HeadDim] && dense {
		f := plan.FlashAttention(p.HeadDim, b.step.ntiles)
		l := b.newLaunch(st.kern(f.Kernel), f.GridX, p.Heads, 1, f.Threads).p(o.ptr).p(qt.ptr).
			p(st.k[layer]).p(st.v[layer]).p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(bs).
			i(p.Heads).i(p.KVHeads).f(p.Scale).i(p.Window).f(p.Softcap).p(b.step.tiles).i(qt.cols).i(o.cols).p(sinks)
		l.smem = uint32(f.Smem)
		return
	}
	// The generic kernel, split as above; the last split block of each
	// (token, head) merges.
	splits := plan.GenericSplits(T, p.Heads, b.SMs)
	part, cnt, ok := b.splitScratch(T*p.Heads, splits, p.HeadDim, T*p.Heads)
	if !ok {
		return
	}
	b.newLaunch(st.kern("attention"), p.Heads, T, splits, 128).p(o.ptr).p(part).p(qt.ptr).p(st.k[layer]).p(st.v[layer]).
		p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(bs).i(p.Heads).i(p.KVHeads).i(p.HeadDim).
		f(p.Scale).i(p.Window).f(p.Softcap).p(cnt).p(sinks)
}

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
	if act == backend.Sigmoid { // its one-column gates differ in shape (ops_deltanet.go)
		b.gatedSigmoid(d, g, u)
		return
	}
	if !sameShape(d, g, u) {
		panic("cuda: GatedAct shape mismatch")
	}
	n := g.rows * g.cols
	if n == 0 {
		return
	}
	name := gatedKernel(act)
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
// summed with the routing weights into dst. All k slots run in one launch
// per projection (grid.z), so the layer is 7 launches instead of 2+5k (42
// for Qwen3-MoE's k=8, where launches, not bytes, set the time: 52 tok/s).
// Each token still reads its experts' weights on its own (prefill of long
// prompts is slow: no grouped expert GEMM yet).
func (b *Backend) MoE(dst, x backend.Tensor, router backend.Weight, e backend.Experts, p backend.MoEParams) {
	b.moe(dst, x, x, router, e, p)
}

// MoERouted is MoE with the router reading routerX (backend.RoutedMoE,
// FeatureMoERouted: Gemma 4).
func (b *Backend) MoERouted(dst, x, routerX backend.Tensor, router backend.Weight, e backend.Experts, p backend.MoEParams) {
	b.moe(dst, x, routerX, router, e, p)
}

func (b *Backend) moe(dst, x, routerX backend.Tensor, router backend.Weight, e backend.Experts, p backend.MoEParams) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.arenaRelease(b.markArena()) // routing, gathered rows and expert outputs die with the op
	d, s, rs := b.tt(dst), b.tt(x), b.tt(routerX)
	rw, gw, uw, dw := b.wt(router), b.wt(e.Gate), b.wt(e.Up), b.wt(e.Down)
	T, hidden, E, inter := s.rows, s.cols, rw.out, gw.out
	if d.rows != T || d.cols != hidden || rs.rows != T || rs.cols != hidden || rw.in != hidden || gw.experts != E ||
		gw.in != hidden || dw.out != hidden || dw.in != inter || p.TopK < 1 || p.TopK > 16 || p.TopK > E || e.Lo != 0 {
		panic(fmt.Sprintf("cuda: MoE shapes: x %dx%d router input %dx%d router %v gate %v down %v top-%d, experts from %d",
			T, hidden, rs.rows, rs.cols, rw.shape, gw.shape, dw.shape, p.TopK, e.Lo))
	}
	ex := b.moeExtrasOf(e, p, E, inter, hidden)
	if T == 0 {
		return
	}
	// Gemma 4's extras (another router input, expert scales) and gpt-oss's
	// (biases, clamped SwiGLU) run on every path (moe_ext.go).
	if b.moeGEMMApplies(s, gw, uw, dw, E, p.TopK) && rs.ptr%16 == 0 && ex.gemmTakes() { // many tokens: grouped expert GEMM (ops_moe.go)
		b.moeGEMM(d, s, rs, rw, gw, uw, dw, p, ex)
		return
	}
	if b.moeDecode(d, s, rs, rw, gw, uw, dw, p, ex, 0) { // few tokens: three launches (ops_moe_decode.go)
		return
	}
	b.moeGrouped(d, s, rs, rw, gw, uw, dw, p, ex)
}

// moeGrouped records the MoE op in seven launches (router GEMV,
// moe_route_w, gate, up, gated activation, down, moe_sum), every slot of
// a step's tokens in each: for the shapes the three-launch path does not
// take, and for every call with biases or the clamped SwiGLU (moe_ext.go),
// which add their own launches between those. rs is the router's input
// (s for plain MoE).
func (b *Backend) moeGrouped(d, s, rs *Tensor, rw, gw, uw, dw *weight, p backend.MoEParams, ex moeExtras) {
	T, hidden, E, inter := s.rows, s.cols, rw.out, gw.out
	alloc := func(n int) uintptr {
		ptr, err := b.arenaAlloc(n)
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
		b.gemv(logits+uintptr(r*E*4), rs.ptr+uintptr(r*hidden*4), rw, ex.routerBias, m, E, hidden, 0, 0, 0)
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
	b.moeScaleWeights(wts, idx, ex.scale, T*p.TopK)
	b.gemv(g, s.ptr, gw, 0, T, inter, hidden, idx, p.TopK, -1)
	b.gemv(u, s.ptr, uw, 0, T, inter, hidden, idx, p.TopK, -1)
	b.moeSlotBias(g, ex.gateBias, idx, T, p.TopK, inter)
	b.moeSlotBias(u, ex.upBias, idx, T, p.TopK, inter)
	b.moeAct(g, u, slots*T*inter, p)
	b.gemv(y, g, dw, 0, T, hidden, inter, idx, p.TopK, -2)
	b.moeSlotBias(y, ex.downBias, idx, T, p.TopK, hidden)
	b.newLaunch("moe_sum", T, 1, 1, min(256, roundUp(hidden, 32))).p(d.ptr).p(y).p(wts).i(T).i(p.TopK).i(hidden)
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
		part, err := b.arenaAlloc(8 * S * t.rows)
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
