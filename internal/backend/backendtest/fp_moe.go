package backendtest

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// MoE experts in MLX's floating-point modes with the plain gated MLP: the
// weight-format side of gpt-oss's block (MoEGptOss adds its biases and
// clamped SwiGLU), on every path a backend has by token count: decode
// (1-8 tokens), a few rows a slot, and prefill-sized steps; top-k 2, 4
// and 8 (a backend's per-slot and accumulating down kernels); routers
// dense, affine and in the experts' mode.
func init() {
	register("MoEFP", needs(runMoEFP, backend.FeatureFPQuant))
}

func runMoEFP(e *env) {
	bf, q8 := wkind{tensor.BF16, 0, 0}, wkind{tensor.BF16, 8, 64}
	for _, mode := range fpModes {
		for i, c := range []struct {
			E, hidden, inter, topk, T int
			router                    wkind
			fpRouter                  bool
			heavy                     bool   // skipped for mxfp8, whose CPU kernels are slow
			only                      string // one mode's widths (nvfp4: groups of 16, not of 32)
		}{
			{8, 128, 96, 2, 1, bf, false, false, ""},
			{8, 128, 96, 2, 5, q8, false, false, ""},
			{16, 256, 160, 8, 1, bf, true, false, ""},
			{16, 256, 160, 8, 3, q8, false, true, ""},
			{32, 320, 192, 4, 33, bf, false, true, ""},
			{4, 128, 64, 2, 40, bf, true, false, ""},
			// 32+ tokens at widths that are multiples of 64 but not of 128
			// (gpt-oss's 2880 = 45 x 64): a backend's grouped prefill path.
			{16, 192, 320, 4, 48, bf, false, true, ""},
			{8, 384, 192, 2, 100, q8, true, true, ""},
			{2, 2048, 256, 2, 1, bf, false, false, ""}, // gate/up rows of 64 chunks at 4 bits (128 at 8), down 8 (16)
			// nvfp4 rows of an odd count of groups (down: 80 = 5 x 16).
			{4, 128, 80, 2, 3, bf, false, false, quant.NVFP4},
			{4, 128, 80, 2, 1, bf, true, false, quant.NVFP4},
			{16, 256, 160, 4, 12, bf, false, false, ""}, // 12 tokens: per token, or grouped where a backend takes them so
		} {
			if c.heavy && mode == quant.MXFP8 || c.only != "" && c.only != mode {
				continue
			}
			var router wpair
			if c.fpRouter {
				router = e.fpWeight("router", []int{c.E, c.hidden}, e.randn(c.E*c.hidden, 0.2), mode)
			} else {
				router = e.weight(c.router.host("router", []int{c.E, c.hidden}, e.randn(c.E*c.hidden, 0.2)))
			}
			ex := func(name string, out, in int) wpair {
				return e.fpWeight(name, []int{c.E, out, in}, e.randn(c.E*out*in, 0.1), mode)
			}
			g, u, d := ex("gate", c.inter, c.hidden), ex("up", c.inter, c.hidden), ex("down", c.hidden, c.inter)
			e.simpleStep(c.T)
			x := e.input(c.T, c.hidden, e.randn(c.T*c.hidden, 1))
			out := e.poisoned(c.T, c.hidden)
			p := backend.MoEParams{TopK: c.topk, Renorm: i%2 == 0, Act: backend.SiLU}
			e.test.MoE(out.a, x.a, router.a, backend.Experts{Gate: g.a, Up: u.a, Down: d.a}, p)
			e.ref.MoE(out.b, x.b, router.b, backend.Experts{Gate: g.b, Up: u.b, Down: d.b}, p)
			rname := c.router.String()
			if c.fpRouter {
				rname = mode
			}
			e.check(fmt.Sprintf("MoE/%s/E%d/%dx%d/router=%s/top%d/T%d", mode, c.E, c.hidden, c.inter, rname, c.topk, c.T), out, c.T)
		}
	}
}
