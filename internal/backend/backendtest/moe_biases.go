package backendtest

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

func init() {
	register("MoEBiases", needs(runMoEBiases, backend.FeatureMoEBiases, backend.FeatureSwiGLUClamped))
	register("AttentionSinksLong", needs(runAttentionSinksLong, backend.FeatureAttentionSinks))
}

// runMoEBiases: gpt-oss's MoE extras without FP quantization (its bf16
// checkpoints; MoEGptOss covers mxfp4): router, gate, up and down biases
// and the clamped SwiGLU, with dense and affine-quantized experts, at
// decode and prefill row counts (1 to 40 rows: both sides of the 32 rows
// where a backend may switch MoE paths). Some cases leave out biases or
// the clamp, so each extra is also seen alone. Gate and up weights are
// large enough that the clamp at the limit is reached.
func runMoEBiases(e *env) {
	q4, q8, bf := wkind{tensor.BF16, 4, 64}, wkind{tensor.BF16, 8, 64}, wkind{tensor.BF16, 0, 0}
	clamped := backend.MoEParams{Renorm: true, Act: backend.SwiGLUClamped, Alpha: 1.702, Limit: 7}
	silu := backend.MoEParams{Renorm: true, Act: backend.SiLU}
	for _, c := range []struct {
		k, router              wkind
		E, hidden, inter, topk int
		T                      int
		p                      backend.MoEParams
		biases                 string // which biases: r(outer) g(ate) u(p) d(own)
	}{
		{bf, bf, 8, 64, 96, 2, 1, clamped, "rgud"}, {bf, bf, 8, 64, 96, 4, 7, clamped, "rgud"},
		{bf, bf, 16, 128, 64, 4, 40, clamped, "rgud"}, {q4, q8, 8, 128, 64, 2, 1, clamped, "rgud"},
		{q4, q8, 16, 128, 192, 4, 40, clamped, "rgud"}, {q4, q8, 8, 128, 128, 2, 5, silu, "rd"},
		{q4, q8, 32, 128, 64, 4, 33, clamped, ""}, {bf, bf, 8, 64, 96, 3, 3, silu, "gu"},
	} {
		router := e.weight(c.router.host("router", []int{c.E, c.hidden}, e.randn(c.E*c.hidden, 0.2)))
		ex := func(name string, out, in int, scale float64) wpair {
			return e.weight(c.k.host(name, []int{c.E, out, in}, e.randn(c.E*out*in, scale)))
		}
		g, u, d := ex("gate", c.inter, c.hidden, 0.5), ex("up", c.inter, c.hidden, 0.5), ex("down", c.hidden, c.inter, 0.1)
		var ea, eb backend.Experts
		ea.Gate, ea.Up, ea.Down, eb.Gate, eb.Up, eb.Down = g.a, u.a, d.a, g.b, u.b, d.b
		bias := func(key rune, name string, shape []int, pa, pb *backend.Weight) {
			for _, r := range c.biases {
				if r == key {
					w := e.weight(denseHost(name, shape, e.randn(shapeLen(shape), 0.5), tensor.BF16))
					*pa, *pb = w.a, w.b
				}
			}
		}
		bias('r', "router_bias", []int{c.E}, &ea.RouterBias, &eb.RouterBias)
		bias('g', "gate_bias", []int{c.E, c.inter}, &ea.GateBias, &eb.GateBias)
		bias('u', "up_bias", []int{c.E, c.inter}, &ea.UpBias, &eb.UpBias)
		bias('d', "down_bias", []int{c.E, c.hidden}, &ea.DownBias, &eb.DownBias)
		e.simpleStep(c.T)
		x := e.input(c.T, c.hidden, e.randn(c.T*c.hidden, 1))
		out := e.poisoned(c.T, c.hidden)
		p := c.p
		p.TopK = c.topk
		e.test.MoE(out.a, x.a, router.a, ea, p)
		e.ref.MoE(out.b, x.b, router.b, eb, p)
		e.check(fmt.Sprintf("MoE/biases=%s/act%d/%s/E%d/%dx%d/top%d/T%d", c.biases, p.Act, c.k, c.E, c.hidden, c.inter, c.topk, c.T), out, c.T)
	}
	runMoEBiasesDecode(e)
}

func shapeLen(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// runAttentionSinksLong: sinks with windows shorter than the context, at
// head dims the GPU's decode and flash kernels take (64, 128) and an odd
// one, over a long prefill (40 rows of one sequence past 15 cached), a
// mixed step and decode steps: gpt-oss alternates 128-token windows with
// full layers, so a sink meets both masks.
func runAttentionSinksLong(e *env) {
	for _, c := range []struct{ heads, kvh, hd, bs, window int }{{8, 2, 64, 8, 16}, {4, 1, 128, 16, 24}, {8, 8, 64, 16, 0},
		{6, 2, 20, 4, 9}} {
		sinks := e.weight(denseHost("sinks", []int{c.heads}, e.randn(c.heads, 2), tensor.BF16))
		p := backend.AttnParams{Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))),
			Window: c.window, Sinks: sinks.a}
		pb := p
		pb.Sinks = sinks.b
		spec := backend.KVSpec{NumBlocks: 64, BlockSize: c.bs, Layers: []backend.KVLayer{{KVHeads: c.kvh, HeadDim: c.hd}}}
		kva, kvb := e.kvStores(spec)
		tables := e.scatteredTables(spec.NumBlocks, 60)
		lens := []int{0, 0, 0}
		for si, plan := range [][]int{{15, 2, 0}, {40, 0, 0}, {1, 1, 1}, {1, 33, 1}, {1, 1, 1}} {
			T := e.planStep(plan, tables, lens)
			q, k, v := e.qkv(T, c.heads, c.kvh, c.hd)
			out := e.poisoned(T, c.heads*c.hd)
			e.test.Attention(out.a, q.a, k.a, v.a, kva, 0, p)
			e.ref.Attention(out.b, q.b, k.b, v.b, kvb, 0, pb)
			e.check(fmt.Sprintf("Attention/sinks-long/h%d/kv%d/d%d/win%d/step%d", c.heads, c.kvh, c.hd, c.window, si), out, T)
		}
	}
}
