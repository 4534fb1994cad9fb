package backendtest

import (
	"fmt"
	"strings"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// moeDecodeRows are decode-sized MoE calls: one token, a few, and one
// below the 32 rows where a backend may switch to a grouped GEMM.
var moeDecodeRows = []int{1, 2, 5, 31}

// moeDecodeExtras are the combinations of gpt-oss's extras the decode
// sweeps run: all, none, the clamp alone, each bias alone (r outer, g ate,
// u p, d own), so a backend that takes each extra in a different kernel
// (CUDA's three-launch path: one _x kernel a stage) is seen with each on
// and off.
var moeDecodeExtras = []struct {
	biases  string
	clamped bool
}{{"rgud", true}, {"", false}, {"", true}, {"r", false}, {"g", false}, {"u", false}, {"d", false}, {"gu", true}}

// moeBlock is one MoE block's weights on both backends, with every bias,
// for the decode sweeps.
type moeBlock struct {
	name                   string // the experts' kind, for the check's name
	E, hidden, inter, topk int
	router, gate, up, down wpair
	rb, gb, ub, db         wpair
}

// newMoEBlock uploads a block: the router of kind rk, the experts from
// expert (name, shape, scale of the random values), bf16 biases. Gate and
// up are large enough that the clamp at the limit is reached.
func (e *env) newMoEBlock(name string, rk wkind, E, hidden, inter, topk int,
	expert func(name string, shape []int, scale float64) wpair) *moeBlock {
	bias := func(name string, shape ...int) wpair {
		return e.weight(denseHost(name, shape, e.randn(shapeLen(shape), 0.5), tensor.BF16))
	}
	return &moeBlock{name: name, E: E, hidden: hidden, inter: inter, topk: topk,
		router: e.weight(rk.host("router", []int{E, hidden}, e.randn(E*hidden, 0.2))),
		gate:   expert("gate", []int{E, inter, hidden}, 0.5), up: expert("up", []int{E, inter, hidden}, 0.5),
		down: expert("down", []int{E, hidden, inter}, 0.1),
		rb:   bias("router_bias", E), gb: bias("gate_bias", E, inter), ub: bias("up_bias", E, inter),
		db: bias("down_bias", E, hidden)}
}

// decodeSweep runs the block at every decode row count with every
// combination of extras, against the reference.
func (e *env) decodeSweep(m *moeBlock) {
	for _, x := range moeDecodeExtras {
		var ea, eb backend.Experts
		ea.Gate, ea.Up, ea.Down, eb.Gate, eb.Up, eb.Down = m.gate.a, m.up.a, m.down.a, m.gate.b, m.up.b, m.down.b
		for key, w := range map[rune]struct {
			src    wpair
			pa, pb *backend.Weight
		}{'r': {m.rb, &ea.RouterBias, &eb.RouterBias}, 'g': {m.gb, &ea.GateBias, &eb.GateBias},
			'u': {m.ub, &ea.UpBias, &eb.UpBias}, 'd': {m.db, &ea.DownBias, &eb.DownBias}} {
			if strings.ContainsRune(x.biases, key) {
				*w.pa, *w.pb = w.src.a, w.src.b
			}
		}
		p := backend.MoEParams{TopK: m.topk, Renorm: true, Act: backend.SiLU}
		if x.clamped {
			p.Act, p.Alpha, p.Limit = backend.SwiGLUClamped, 1.702, 7
		}
		for _, T := range moeDecodeRows {
			e.simpleStep(T)
			in := e.input(T, m.hidden, e.randn(T*m.hidden, 1))
			out := e.poisoned(T, m.hidden)
			e.test.MoE(out.a, in.a, m.router.a, ea, p)
			e.ref.MoE(out.b, in.b, m.router.b, eb, p)
			e.check(fmt.Sprintf("MoE/decode/biases=%s/act%d/%s/E%d/%dx%d/top%d/T%d", x.biases, p.Act, m.name, m.E, m.hidden,
				m.inter, m.topk, T), out, T)
		}
	}
}

// runMoEBiasesDecode: MoEBiases's decode sweep, affine experts (scales
// bf16 or f32, groups of 32 or 64) and dense bf16 ones; odd expert counts
// and top-k (12, 3: the per-slot down kernel), top-8 (the slot-per-warp
// one), routers affine 8-bit and dense bf16.
func runMoEBiasesDecode(e *env) {
	for _, c := range []struct {
		k, router              wkind
		E, hidden, inter, topk int
	}{
		{wkind{tensor.BF16, 4, 32}, wkind{tensor.BF16, 8, 64}, 12, 128, 96, 3},
		{wkind{tensor.BF16, 8, 32}, wkind{tensor.BF16, 8, 64}, 12, 128, 96, 3},
		{wkind{tensor.BF16, 4, 64}, wkind{tensor.BF16, 0, 0}, 16, 256, 128, 8},
		{wkind{tensor.F32, 4, 64}, wkind{tensor.BF16, 4, 64}, 16, 256, 192, 4},
		{wkind{tensor.BF16, 8, 64}, wkind{tensor.BF16, 0, 0}, 16, 256, 128, 8},
		{wkind{tensor.BF16, 0, 0}, wkind{tensor.BF16, 0, 0}, 8, 64, 96, 2},
	} {
		k := c.k
		e.decodeSweep(e.newMoEBlock(k.String(), c.router, c.E, c.hidden, c.inter, c.topk,
			func(name string, shape []int, scale float64) wpair {
				return e.weight(k.host(name, shape, e.randn(shapeLen(shape), scale)))
			}))
	}
}

// runMoEGptOssDecode: MoEGptOss's decode sweep, mx experts (gpt-oss's
// mxfp4, and mxfp8) with routers affine 8-bit (mlx's conversions) and
// dense bf16 (the openai checkpoints), top-2, 4 and 8.
func runMoEGptOssDecode(e *env, modes ...string) {
	for _, mode := range modes {
		for _, c := range []struct {
			router                 wkind
			E, hidden, inter, topk int
		}{
			{wkind{tensor.BF16, 8, 64}, 8, 128, 96, 2},
			{wkind{tensor.BF16, 0, 0}, 32, 256, 160, 4},
			{wkind{tensor.BF16, 8, 64}, 16, 128, 64, 8},
		} {
			e.decodeSweep(e.newMoEBlock(mode, c.router, c.E, c.hidden, c.inter, c.topk,
				func(name string, shape []int, scale float64) wpair {
					return e.fpWeight(name, shape, e.randn(shapeLen(shape), scale), mode)
				}))
		}
	}
}
