//go:build linux

package cuda

import (
	"testing"
	"unsafe"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// hostOnlyBackend is a Backend that records launches without a device:
// kernel handles and pointers are made-up numbers. Recording and graph
// matching are host code, so their cost per decode step can be measured
// anywhere (BenchmarkRecordDecodeStep).
func hostOnlyBackend() *Backend {
	b := &Backend{fns: map[string]uintptr{}, SMs: 132}
	b.setDefaults() // the defaults, as New sets them
	for i, n := range kernelNames() {
		b.fns[n] = uintptr(0x1000 + i)
	}
	b.graphs.init(true)
	// A step in progress, with scratch and counters already grown: made-up
	// device addresses, never dereferenced on the host.
	b.inStep = true
	b.step = stepInfo{tokens: 1, seqs: 1, logitRows: 1, btStride: 32, tok: 0x100, pos: 0x104, tok2seq: 0x108, rows: 0x10c,
		btab: 0x110, decode: true, maxLen: 1, maxCtx: 264, consecutive: true}
	b.arena.chunks = []devBuf{{ptr: 1 << 36, size: 64 << 20}}
	b.cntBuf, b.cntN = devBuf{ptr: 1 << 37, size: 4 << 20}, 1<<20
	return b
}

// llamaStep holds made-up tensors and weights of Llama-3.1-8B's shapes
// for recording its decode step without a device.
type llamaStep struct {
	layers                         []llamaLayer
	head, norm                     *weight
	h, x, q, k, v, att, o, g, u, a *Tensor
	dn, logits                     *Tensor
	kv                             *kvStore
	rope                           backend.RoPE
}

type llamaLayer struct{ q, k, v, o, g, u, d *weight }

func newLlamaStep(layers int) *llamaStep {
	addr := uintptr(1 << 20)
	tensor := func(cols int) *Tensor {
		addr += uintptr(4*cols+255) &^ 255
		return &Tensor{ptr: addr, rows: 1, cols: cols}
	}
	quantW := func(out, in int) *weight {
		addr += uintptr(out*in/2+255) &^ 255
		w := &weight{shape: []int{out, in}, experts: 1, out: out, in: in, quant: true, bits: 4, group: 64, gshft: 6, w: addr}
		addr += uintptr(out*in/16+255) &^ 255
		w.sb, w.bytes = addr, out*in/2+out*in/16
		return w
	}
	const hidden, inter, kv, vocab = 4096, 14336, 1024, 128256
	s := &llamaStep{layers: make([]llamaLayer, layers)}
	for i := range s.layers {
		s.layers[i] = llamaLayer{quantW(hidden, hidden), quantW(kv, hidden), quantW(kv, hidden), quantW(hidden, hidden),
			quantW(inter, hidden), quantW(inter, hidden), quantW(hidden, inter)}
	}
	s.head = quantW(vocab, hidden)
	s.norm = &weight{shape: []int{hidden}, experts: 1, out: hidden, in: 1, w: addr + 64}
	s.h, s.x, s.q, s.k, s.v, s.att, s.o = tensor(hidden), tensor(hidden), tensor(hidden), tensor(kv), tensor(kv), tensor(hidden), tensor(hidden)
	s.g, s.u, s.a, s.dn, s.logits = tensor(inter), tensor(inter), tensor(inter), tensor(hidden), tensor(vocab)
	s.kv = benchKV(layers, 8, addr+1<<30)
	s.rope = benchRoPE()
	return s
}

// attnParams are Llama-3.1-8B's attention shapes.
var attnParams = backend.AttnParams{Heads: 32, KVHeads: 8, HeadDim: 128, Scale: 0.088, ScratchQK: true} // as the model sets it

// record records what a Llama-3.1-8B decode step records: per layer the
// q/k/v products on one row, RoPE and attention, the o, gate/up and down
// products, the gated activation, and the two residual adds with their
// norms; then the final norm and the LM head.
func (s *llamaStep) record(b *Backend) {
	var nilW backend.Weight
	for i, l := range s.layers {
		b.RMSNorm(s.x, s.h, s.norm, 1e-5)
		b.Linear(s.q, s.x, l.q, nilW)
		b.Linear(s.k, s.x, l.k, nilW)
		b.Linear(s.v, s.x, l.v, nilW)
		b.ApplyRoPE(s.q, attnParams.Heads, attnParams.HeadDim, s.rope)
		b.ApplyRoPE(s.k, attnParams.KVHeads, attnParams.HeadDim, s.rope)
		b.Attention(s.att, s.q, s.k, s.v, s.kv, i, attnParams)
		b.Linear(s.o, s.att, l.o, nilW)
		b.Add(s.h, s.h, s.o)
		b.RMSNorm(s.x, s.h, s.norm, 1e-5)
		b.Linear(s.g, s.x, l.g, nilW)
		b.Linear(s.u, s.x, l.u, nilW)
		b.GatedAct(s.a, s.g, s.u, backend.SiLU)
		b.Linear(s.dn, s.a, l.d, nilW)
		b.Add(s.h, s.h, s.dn)
	}
	b.RMSNorm(s.x, s.h, s.norm, 1e-5)
	b.Linear(s.logits, s.x, s.head, nilW)
}

// BenchmarkRecordDecodeStep measures the host's share of a Llama-3.1-8B
// decode step spent recording its launches while the device waits
// (ns/op); BenchmarkMatchDecodeStep, matching them to the captured graph.
// The device-side counterpart is DeviceIdle.
func BenchmarkRecordDecodeStep(bm *testing.B) {
	st := newLlamaStep(32)
	benchRecord(bm, st.rope, st.record)
}

// benchRecord times record, one decode step's recording, on a host-only
// backend that knows the step's rotary table.
func benchRecord(bm *testing.B, rope backend.RoPE, record func(*Backend)) {
	b := hostOnlyBackend()
	knowRoPETable(b, rope)
	record(b)
	n := len(b.rec.ls)
	bm.ReportAllocs()
	bm.ResetTimer()
	for range bm.N {
		b.rec.ls, b.arena.cur, b.arena.off = b.rec.ls[:0], 0, 0 // as BeginStep leaves them
		record(b)
	}
	bm.ReportMetric(float64(n), "launches/step")
}

func BenchmarkMatchDecodeStep(bm *testing.B) {
	b, st := hostOnlyBackend(), newLlamaStep(32)
	knowRoPETable(b, st.rope)
	st.record(b)
	_, key := b.graphs.lookup(b.rec.ls)
	b.graphs.m[key] = &graph{ls: append([]launch(nil), b.rec.ls...)}
	bm.ResetTimer()
	for range bm.N {
		if g, _ := b.graphs.lookup(b.rec.ls); g == nil {
			bm.Fatal("the step's launches did not match their graph")
		}
	}
}

// qwen3Step records a Qwen3-30B-A3B decode step (48 layers: q/k/v with
// per-head q/k norms, RoPE, attention, o, and the MoE block of 128
// experts, top 8) on made-up addresses.
type qwen3Step struct {
	layers                []qwen3Layer
	head, norm, qn, kn    *weight
	h, x, q, k, v, att, o *Tensor
	moe, logits           *Tensor
	kv                    *kvStore
	rope                  backend.RoPE
	attn                  backend.AttnParams
}

type qwen3Layer struct {
	q, k, v, o, router *weight
	experts            backend.Experts
}

func newQwen3Step(layers int) *qwen3Step {
	addr := uintptr(1 << 20)
	next := func(n int) uintptr { addr += uintptr(n+255) &^ 255; return addr }
	tensor := func(cols int) *Tensor { return &Tensor{ptr: next(4 * cols), rows: 1, cols: cols} }
	quantW := func(experts, out, in, bits int) *weight {
		w := &weight{shape: []int{experts, out, in}, experts: experts, out: out, in: in, quant: true, bits: bits, group: 64, gshft: 6}
		w.w, w.sb = next(experts*out*in*bits/8), next(experts*out*in/16)
		w.bytes = experts * out * in * (bits + 1) / 8
		return w
	}
	const hidden, inter, vocab, E = 2048, 768, 151936, 128
	s := &qwen3Step{layers: make([]qwen3Layer, layers), attn: backend.AttnParams{Heads: 32, KVHeads: 4, HeadDim: 128, Scale: 0.088, ScratchQK: true}}
	for i := range s.layers {
		s.layers[i] = qwen3Layer{q: quantW(1, 4096, hidden, 4), k: quantW(1, 512, hidden, 4), v: quantW(1, 512, hidden, 4),
			o: quantW(1, hidden, 4096, 4), router: quantW(1, E, hidden, 8),
			experts: backend.Experts{Gate: quantW(E, inter, hidden, 4), Up: quantW(E, inter, hidden, 4), Down: quantW(E, hidden, inter, 4)}}
	}
	s.head = quantW(1, vocab, hidden, 4)
	s.norm = &weight{shape: []int{hidden}, experts: 1, out: hidden, in: 1, w: next(4 * hidden)}
	s.qn = &weight{shape: []int{128}, experts: 1, out: 128, in: 1, w: next(512)}
	s.kn = &weight{shape: []int{128}, experts: 1, out: 128, in: 1, w: next(512)}
	s.h, s.x, s.q, s.k, s.v, s.att, s.o = tensor(hidden), tensor(hidden), tensor(4096), tensor(512), tensor(512), tensor(4096), tensor(hidden)
	s.moe, s.logits = tensor(hidden), tensor(vocab)
	s.kv = benchKV(layers, 4, next(1<<30))
	s.rope = benchRoPE()
	return s
}

func (s *qwen3Step) record(b *Backend) {
	var nilW backend.Weight
	p := s.attn
	for i, l := range s.layers {
		b.RMSNorm(s.x, s.h, s.norm, 1e-6)
		b.Linear(s.q, s.x, l.q, nilW)
		b.Linear(s.k, s.x, l.k, nilW)
		b.Linear(s.v, s.x, l.v, nilW)
		qv, kv := b.View(s.q, p.Heads, p.HeadDim), b.View(s.k, p.KVHeads, p.HeadDim)
		b.RMSNorm(qv, qv, s.qn, 1e-6)
		b.RMSNorm(kv, kv, s.kn, 1e-6)
		b.ApplyRoPE(s.q, p.Heads, p.HeadDim, s.rope)
		b.ApplyRoPE(s.k, p.KVHeads, p.HeadDim, s.rope)
		b.Attention(s.att, s.q, s.k, s.v, s.kv, i, p)
		b.Linear(s.o, s.att, l.o, nilW)
		b.Add(s.h, s.h, s.o)
		b.RMSNorm(s.x, s.h, s.norm, 1e-6)
		b.MoE(s.moe, s.x, l.router, l.experts, backend.MoEParams{TopK: 8, Renorm: true, Act: backend.SiLU})
		b.Add(s.h, s.h, s.moe)
	}
	b.RMSNorm(s.x, s.h, s.norm, 1e-6)
	b.Linear(s.logits, s.x, s.head, nilW)
}

// BenchmarkRecordQwen3Step is BenchmarkRecordDecodeStep for Qwen3-30B-A3B.
func BenchmarkRecordQwen3Step(bm *testing.B) {
	st := newQwen3Step(48)
	benchRecord(bm, st.rope, st.record)
}

// benchRoPE is a made-up rotary table of head dim 128.
func benchRoPE() backend.RoPE {
	r := backend.RoPE{RotaryDim: 128, InvFreq: make([]float32, 64), Scale: 1}
	for i := range r.InvFreq {
		r.InvFreq[i] = float32(i + 1)
	}
	return r
}

// knowRoPETable gives b a made-up device copy of r's table, as ropeTable
// would have uploaded it (which needs a device).
func knowRoPETable(b *Backend, r backend.RoPE) {
	b.ropeTabs = map[string]uintptr{string(unsafe.Slice((*byte)(unsafe.Pointer(&r.InvFreq[0])), 4*len(r.InvFreq))): 0x9000}
}

// benchKV is a KV store of layers of kvHeads heads of dim 128 at made-up
// addresses from base.
func benchKV(layers, kvHeads int, base uintptr) *kvStore {
	kv := &kvStore{spec: backend.KVSpec{NumBlocks: 64, BlockSize: 16}}
	for i := range layers {
		kv.spec.Layers = append(kv.spec.Layers, backend.KVLayer{KVHeads: kvHeads, HeadDim: 128})
		kv.k, kv.v = append(kv.k, base+uintptr(2*i)<<24), append(kv.v, base+uintptr(2*i+1)<<24)
	}
	return kv
}
