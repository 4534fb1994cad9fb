package backendtest

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

func init() {
	register("GatedDeltaNet", needs(runGatedDeltaNet, backend.FeatureGatedDeltaNet))
	register("GatedDeltaNetChunks", needs(runGatedDeltaNetChunks, backend.FeatureGatedDeltaNet))
	register("GatedActSigmoid", needs(runGatedActSigmoid, backend.FeatureSigmoidGate))
}

// deltaStep is one step of a GatedDeltaNet case: new tokens per sequence
// (0: absent), and whether sequence 0 starts again at position 0.
type deltaStep struct {
	plan    []int
	restart bool
}

// runGatedDeltaNet: Qwen3.5's linear attention over three sequences in
// slots 2, 0 and 1: a prefill longer than two chunks beside a short one,
// decode steps of two and of all three, a prefill mixed with decodes, a
// continuation chunk and one shorter than the conv window (which then
// keeps some of its old inputs), and a sequence restarted at position 0
// in a slot that holds state; the outputs of every step depend on the
// states the earlier ones left. The shapes include key dims that are not
// powers of two, value dims that do not fill a kernel's column tile,
// three value heads a key head, and conv kernels of 2 and 3.
func runGatedDeltaNet(e *env) {
	for _, c := range []struct {
		p  backend.DeltaNetParams
		dt tensor.DType
	}{
		{backend.DeltaNetParams{KHeads: 2, VHeads: 4, KDim: 32, VDim: 32, ConvKernel: 4, ChunkSize: 64}, tensor.BF16},
		{backend.DeltaNetParams{KHeads: 1, VHeads: 2, KDim: 128, VDim: 128, ConvKernel: 4, ChunkSize: 64}, tensor.BF16},
		{backend.DeltaNetParams{KHeads: 1, VHeads: 3, KDim: 24, VDim: 40, ConvKernel: 3, ChunkSize: 64}, tensor.F32},
		{backend.DeltaNetParams{KHeads: 1, VHeads: 1, KDim: 200, VDim: 20, ConvKernel: 2, ChunkSize: 64}, tensor.F32},
	} {
		runDeltaNetShape(e, c.p, c.dt, "", []deltaStep{
			{plan: []int{150, 9, 0}}, {plan: []int{1, 1, 0}}, {plan: []int{1, 1, 5}}, {plan: []int{1, 1, 1}},
			{plan: []int{0, 21, 2}}, {plan: []int{1, 0, 1}}, {plan: []int{3, 1, 1}, restart: true}, {plan: []int{1, 1, 0}},
		})
	}
}

// runGatedDeltaNetChunks: ragged steps of four sequences whose chunks run
// from 1 to 300 positions, around the lengths where a backend may switch
// between the recurrent and the chunked form (16, 32, 64 and their
// neighbours) and across chunks of 64 with a short last one, each
// continuing the states (and conv windows) the earlier steps left, one
// restart at position 0, then decode steps after the long chunks.
func runGatedDeltaNetChunks(e *env) {
	steps := []deltaStep{
		{plan: []int{300, 1, 33, 31}}, {plan: []int{64, 65, 1, 32}}, {plan: []int{1, 129, 63, 2}},
		{plan: []int{40, 0, 16, 15}, restart: true}, {plan: []int{1, 17, 128, 1}}, {plan: []int{1, 1, 1, 1}},
	}
	for _, c := range []struct {
		p  backend.DeltaNetParams
		dt tensor.DType
	}{
		{backend.DeltaNetParams{KHeads: 2, VHeads: 4, KDim: 128, VDim: 128, ConvKernel: 4, ChunkSize: 64}, tensor.BF16},
		{backend.DeltaNetParams{KHeads: 1, VHeads: 3, KDim: 24, VDim: 40, ConvKernel: 3, ChunkSize: 64}, tensor.F32},
		{backend.DeltaNetParams{KHeads: 1, VHeads: 1, KDim: 200, VDim: 20, ConvKernel: 2, ChunkSize: 64}, tensor.F32},
	} {
		runDeltaNetShape(e, c.p, c.dt, "Chunks", steps)
	}
}

func runDeltaNetShape(e *env, p backend.DeltaNetParams, dt tensor.DType, name string, steps []deltaStep) {
	C, hv := p.Channels(), p.VHeads
	conv := e.weight(denseHost("conv", []int{C, 1, p.ConvKernel}, e.randn(C*p.ConvKernel, 0.5), dt))
	alog := e.weight(denseHost("A_log", []int{hv}, e.randn(hv, 0.5), tensor.BF16))
	dtb := e.weight(denseHost("dt_bias", []int{hv}, e.randn(hv, 0.5), tensor.BF16))
	ws := [2]backend.DeltaNetWeights{{Conv: conv.a, ALog: alog.a, DtBias: dtb.a}, {Conv: conv.b, ALog: alog.b, DtBias: dtb.b}}
	kva, kvb := e.kvStores(backend.KVSpec{NumBlocks: 1, BlockSize: 16, Slots: 4, Layers: []backend.KVLayer{{DeltaNet: p}}})
	slots := []int{2, 0, 1, 3}
	lens := []int{0, 0, 0, 0}
	for si, st := range steps {
		if st.restart {
			lens[0] = 0
		}
		b := &backend.Batch{}
		for s, n := range st.plan {
			if n == 0 {
				continue
			}
			b.Seqs = append(b.Seqs, backend.SeqSlice{Start: len(b.Tokens), Len: n, Blocks: []int32{0}, Slot: slots[s]})
			for i := range n {
				b.Tokens = append(b.Tokens, int32(len(b.Tokens)))
				b.Positions = append(b.Positions, int32(lens[s]+i))
			}
			lens[s] += n
		}
		e.step(b)
		T := len(b.Tokens)
		qkv := e.input(T, C, e.randn(T*C, 1))
		ga, gb := e.input(T, hv, e.randn(T*hv, 1)), e.input(T, hv, e.randn(T*hv, 1))
		out := e.poisoned(T, hv*p.VDim)
		for i, be := range []backend.Backend{e.test, e.ref} {
			pick := func(p pair) backend.Tensor { return []backend.Tensor{p.a, p.b}[i] }
			be.(backend.DeltaNetBackend).GatedDeltaNet(pick(out), pick(qkv), pick(ga), pick(gb), ws[i], []backend.KVStore{kva, kvb}[i], 0, p)
		}
		e.check(fmt.Sprintf("GatedDeltaNet"+name+"/k%dx%d/v%dx%d/conv%d/step%d", p.KHeads, p.KDim, p.VHeads, p.VDim, p.ConvKernel, si), out, T)
	}
}

// runGatedActSigmoid: sigmoid(gate)*up elementwise, and with a one-column
// gate scaling whole rows in place.
func runGatedActSigmoid(e *env) {
	const T, W = 7, 97
	e.simpleStep(T)
	g, u := e.input(T, W, e.randn(T*W, 2)), e.input(T, W, e.randn(T*W, 1))
	g1 := e.input(T, 1, e.randn(T, 2))
	for i, be := range []backend.Backend{e.test, e.ref} {
		pick := func(p pair) backend.Tensor { return []backend.Tensor{p.a, p.b}[i] }
		be.GatedAct(pick(g), pick(g), pick(u), backend.Sigmoid)
		be.GatedAct(pick(u), pick(g1), pick(u), backend.Sigmoid)
	}
	e.check("GatedActSigmoid/elementwise", g, T)
	e.check("GatedActSigmoid/row", u, T)
}
