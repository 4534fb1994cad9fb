package backendtest

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// MLX's floating-point quantization modes and gpt-oss's ops. The backend
// under test gets the packed weights; the reference gets them dequantized
// by package quant as dense f32, so the CPU backend's own fp kernels are
// checked against the format reference too, not only against themselves.
//
// A backend that does not declare a case's backend.Features skips it (the
// model families that need them refuse that backend at load, so nothing
// runs on it silently wrong); one that declares them must pass.
func init() {
	register("LinearFP", needs(runLinearFP, backend.FeatureFPQuant))
	register("EmbedFP", needs(runEmbedFP, backend.FeatureFPQuant))
	register("MoEGptOss", needs(runMoEGptOss, backend.FeatureFPQuant, backend.FeatureMoEBiases, backend.FeatureSwiGLUClamped))
	register("AttentionSinks", needs(runAttentionSinks, backend.FeatureAttentionSinks))
}

func needs(run func(e *env), fs ...backend.Feature) func(e *env) {
	return func(e *env) {
		for _, f := range fs {
			if !backend.Supports(e.test, f) {
				e.t.Skipf("the %s backend does not declare %s", e.test.Name(), f)
			}
		}
		run(e)
	}
}

var fpModes = []string{quant.MXFP4, quant.NVFP4, quant.MXFP8}

// fpWeight quantizes x ([.., out, in]) in mode for the backend under test
// and uploads its dequantized values to the reference.
func (e *env) fpWeight(name string, shape []int, x []float32, mode string) wpair {
	e.t.Helper()
	in := shape[len(shape)-1]
	rows := len(x) / in
	packed, scales, err := quant.QuantizeFP(mode, x, rows, in)
	if err != nil {
		e.fatalf("%s: %v", name, err)
	}
	dq, err := quant.DequantizeFP(mode, packed, scales, rows, in)
	if err != nil {
		e.fatalf("%s: %v", name, err)
	}
	bits, group, _ := quant.FPParams(mode)
	h := &tensor.Host{Name: name, Shape: shape, DType: tensor.U32, Data: packed,
		Quant: &tensor.Quant{Bits: bits, GroupSize: group, Scales: scales, ScaleDType: tensor.U8, Mode: mode}}
	a, err := e.test.UploadWeight(h)
	if err != nil {
		e.fatalf("%s: upload %s (%s): %v", e.test.Name(), name, mode, err)
	}
	b, err := e.ref.UploadWeight(denseHost(name, shape, dq, tensor.F32))
	if err != nil {
		e.fatalf("cpu: upload %s: %v", name, err)
	}
	return wpair{a, b}
}

// runLinearFP covers each mode at one row (the decode GEMVs), a few rows
// (2-8), 33-128 rows (batched decode) and prefill-sized counts, over
// shapes with odd row counts and short rows (a chunk or two a lane), one
// of 3072 inputs (a whole block's lanes a row), and 48 inputs (nvfp4
// only: 6 words a row, off the 16-byte kernels).
func runLinearFP(e *env) {
	all := []int{1, 2, 3, 5, 8, 33, 70, 128, 300}
	for si, s := range []struct {
		n, k int
		rows []int
	}{{67, 256, all}, {130, 384, all}, {48, 96, all}, {37, 160, all}, {29, 48, all}, {129, 3072, []int{1, 4, 40, 300}}} {
		for _, rows := range s.rows {
			runLinearFPCase(e, s.n, s.k, rows, si)
		}
	}
}

func runLinearFPCase(e *env, n, k, rows, seed int) {
	for mi, mode := range fpModes {
		if _, group, _ := quant.FPParams(mode); k%group != 0 {
			continue
		}
		w := e.fpWeight("w", []int{n, k}, e.randn(n*k, 0.05), mode)
		var bias wpair
		withBias := (rows+mi+seed)%2 == 0
		if withBias {
			bias = e.weight(denseHost("bias", []int{n}, e.randn(n, 0.1), tensor.BF16))
		}
		e.simpleStep(rows)
		x := e.input(rows, k, e.randn(rows*k, 1))
		out := e.poisoned(rows, n)
		e.test.Linear(out.a, x.a, w.a, bias.a)
		e.ref.Linear(out.b, x.b, w.b, bias.b)
		e.check(fmt.Sprintf("Linear/%s/%dx%d/rows=%d/bias=%v", mode, n, k, rows, withBias), out, rows)
	}
}

func runEmbedFP(e *env) {
	for _, mode := range fpModes {
		for _, c := range []struct{ V, D, T int }{{37, 512, 9}, {11, 96, 1}, {300, 2880, 40}} {
			w := e.fpWeight("embed", []int{c.V, c.D}, e.randn(c.V*c.D, 1), mode)
			b := &backend.Batch{Seqs: []backend.SeqSlice{{Start: 0, Len: c.T}}}
			for i := range c.T {
				b.Tokens = append(b.Tokens, int32(e.rng.Intn(c.V)))
				b.Positions = append(b.Positions, int32(i))
			}
			e.step(b)
			out := e.poisoned(c.T, c.D)
			e.test.Embed(out.a, w.a)
			e.ref.Embed(out.b, w.b)
			e.check(fmt.Sprintf("Embed/%s/%dx%d/T%d", mode, c.V, c.D, c.T), out, c.T)
		}
	}
}

// runMoEGptOss: gpt-oss's block (biased router, biased experts in mxfp4,
// clamped SwiGLU), decode and prefill-sized steps. Gate and up weights are large enough that the clamp at
// the limit is reached.
func runMoEGptOss(e *env) {
	q8 := wkind{tensor.BF16, 8, 64}
	for _, c := range []struct {
		E, hidden, inter, topk, T int
		mode                      string
	}{{8, 128, 96, 2, 1, quant.MXFP4}, {8, 128, 96, 4, 5, quant.MXFP4}, {32, 256, 128, 4, 33, quant.MXFP4},
		{8, 128, 96, 2, 3, quant.MXFP8},
		// Prefill-sized steps at widths of 64s but not 128s (gpt-oss's
		// 2880 = 45 x 64), in mxfp4 and nvfp4.
		{32, 576, 320, 4, 64, quant.MXFP4}, {16, 192, 320, 4, 40, quant.NVFP4}} {
		router := e.weight(q8.host("router", []int{c.E, c.hidden}, e.randn(c.E*c.hidden, 0.2)))
		ex := func(name string, out, in int, scale float64) wpair {
			return e.fpWeight(name, []int{c.E, out, in}, e.randn(c.E*out*in, scale), c.mode)
		}
		bias := func(name string, n int) wpair {
			return e.weight(denseHost(name, []int{c.E, n}, e.randn(c.E*n, 0.5), tensor.BF16))
		}
		g, u, d := ex("gate", c.inter, c.hidden, 0.5), ex("up", c.inter, c.hidden, 0.5), ex("down", c.hidden, c.inter, 0.1)
		gb, ub, db := bias("gate_bias", c.inter), bias("up_bias", c.inter), bias("down_bias", c.hidden)
		rb := e.weight(denseHost("router_bias", []int{c.E}, e.randn(c.E, 1), tensor.BF16))
		e.simpleStep(c.T)
		x := e.input(c.T, c.hidden, e.randn(c.T*c.hidden, 1))
		out := e.poisoned(c.T, c.hidden)
		p := backend.MoEParams{TopK: c.topk, Renorm: true, Act: backend.SwiGLUClamped, Alpha: 1.702, Limit: 7}
		e.test.MoE(out.a, x.a, router.a, backend.Experts{Gate: g.a, Up: u.a, Down: d.a,
			GateBias: gb.a, UpBias: ub.a, DownBias: db.a, RouterBias: rb.a}, p)
		e.ref.MoE(out.b, x.b, router.b, backend.Experts{Gate: g.b, Up: u.b, Down: d.b,
			GateBias: gb.b, UpBias: ub.b, DownBias: db.b, RouterBias: rb.b}, p)
		e.check(fmt.Sprintf("MoE/gptoss/%s/E%d/%dx%d/top%d/T%d", c.mode, c.E, c.hidden, c.inter, c.topk, c.T), out, c.T)
	}
	runMoEGptOssDecode(e, quant.MXFP4, quant.MXFP8)
}

// runAttentionSinks: per-head sink logits (gpt-oss), with and without a
// window, over prefill and decode steps of several sequences.
func runAttentionSinks(e *env) {
	for _, c := range []struct{ heads, kvh, hd, bs, window int }{{8, 2, 64, 16, 0}, {4, 2, 16, 4, 8}, {8, 1, 64, 8, 128}, {4, 2, 12, 4, 5}} {
		sinks := e.weight(denseHost("sinks", []int{c.heads}, e.randn(c.heads, 2), tensor.BF16))
		p := backend.AttnParams{Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))),
			Window: c.window}
		spec := backend.KVSpec{NumBlocks: 64, BlockSize: c.bs, Layers: []backend.KVLayer{{KVHeads: c.kvh, HeadDim: c.hd}}}
		kva, kvb := e.kvStores(spec)
		tables := e.scatteredTables(spec.NumBlocks, 60)
		lens := []int{0, 0, 0}
		for si, plan := range [][]int{{13, 1, 0}, {1, 7, 20}, {1, 1, 1}} {
			T := e.planStep(plan, tables, lens)
			q, k, v := e.qkv(T, c.heads, c.kvh, c.hd)
			out := e.poisoned(T, c.heads*c.hd)
			pa, pb := p, p
			pa.Sinks, pb.Sinks = sinks.a, sinks.b
			e.test.Attention(out.a, q.a, k.a, v.a, kva, 0, pa)
			e.ref.Attention(out.b, q.b, k.b, v.b, kvb, 0, pb)
			e.check(fmt.Sprintf("Attention/sinks/h%d/kv%d/d%d/win%d/step%d", c.heads, c.kvh, c.hd, c.window, si), out, T)
		}
	}
}
