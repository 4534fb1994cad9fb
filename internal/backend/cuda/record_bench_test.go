//go:build linux

package cuda

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// hostOnlyBackend is a Backend that records launches without a device:
// kernel handles and pointers are made-up numbers. Recording and graph
// matching are host code, so their cost per decode step can be measured
// anywhere (BenchmarkRecordDecodeStep).
func hostOnlyBackend() *Backend {
	b := &Backend{fns: map[string]uintptr{}, fuse: true, SMs: 132, useMMA: true, mmaVariant: "xc", fuseRoPE: true,
		folds: defaultNormFolds, decHeads: decHeadsPerBlock, decHeadsMaxCtx: decHeadsMaxCtx, decSplitKeys: decSplitKeys, decWaves: 2}
	for i, n := range kernelNames() {
		b.fns[n] = uintptr(0x1000 + i)
	}
	b.graphs.init(true)
	return b
}

// llamaStep holds made-up tensors and weights of Llama-3.1-8B's shapes
// for recording its decode step without a device.
type llamaStep struct {
	layers                         []llamaLayer
	head, norm                     *weight
	h, x, q, k, v, att, o, g, u, a *Tensor
	dn, logits                     *Tensor
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
	return s
}

// record records what a Llama-3.1-8B decode step records outside
// attention (which needs a KV store): per layer the q/k/v, o, gate/up and
// down products on one row, the gated activation, and the two residual
// adds with their norms; then the final norm and the LM head.
func (s *llamaStep) record(b *Backend) {
	var nilW backend.Weight
	for _, l := range s.layers {
		b.RMSNorm(s.x, s.h, s.norm, 1e-5)
		b.Linear(s.q, s.x, l.q, nilW)
		b.Linear(s.k, s.x, l.k, nilW)
		b.Linear(s.v, s.x, l.v, nilW)
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
	b, st := hostOnlyBackend(), newLlamaStep(32)
	st.record(b)
	n := len(b.rec.ls)
	bm.ReportAllocs()
	bm.ResetTimer()
	for range bm.N {
		b.rec.ls = b.rec.ls[:0]
		st.record(b)
	}
	bm.ReportMetric(float64(n), "launches/step")
}

func BenchmarkMatchDecodeStep(bm *testing.B) {
	b := hostOnlyBackend()
	newLlamaStep(32).record(b)
	_, key := b.graphs.lookup(b.rec.ls)
	b.graphs.m[key] = &graph{ls: append([]launch(nil), b.rec.ls...)}
	bm.ResetTimer()
	for range bm.N {
		if g, _ := b.graphs.lookup(b.rec.ls); g == nil {
			bm.Fatal("the step's launches did not match their graph")
		}
	}
}
