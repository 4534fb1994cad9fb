package backendtest

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

func init() {
	register("MoERouted", needs(runMoERouted, backend.FeatureMoERouted))
}

// runMoERouted: Gemma 4's block, the router reading another input than
// the experts (backend.RoutedMoE) and per-expert scales on the routing
// weights (Experts.Scale), with a quantized router as mlx-lm stores it.
// Each case is also run as MoERouted(x, x) without scales against the
// reference's plain MoE, which must agree.
func runMoERouted(e *env) {
	q4, q8, bf := wkind{tensor.BF16, 4, 64}, wkind{tensor.BF16, 8, 64}, wkind{tensor.BF16, 0, 0}
	for _, c := range []struct {
		k, router              wkind
		E, hidden, inter, topk int
		T                      int
	}{{bf, bf, 8, 64, 128, 2, 5}, {q4, q8, 8, 128, 64, 2, 1}, {q4, q8, 16, 128, 192, 4, 9},
		// prefill row counts (past the 32 rows where a backend may switch paths)
		{q4, q8, 16, 128, 192, 4, 40}, {bf, bf, 8, 64, 128, 2, 33}} {
		tm, ok1 := e.test.(backend.RoutedMoE)
		rm, ok2 := e.ref.(backend.RoutedMoE)
		if !ok1 || !ok2 {
			e.fatalf("backend declares %s but has no MoERouted", backend.FeatureMoERouted)
		}
		router := e.weight(c.router.host("router", []int{c.E, c.hidden}, e.randn(c.E*c.hidden, 0.3)))
		ex := func(name string, out, in int) wpair {
			return e.weight(c.k.host(name, []int{c.E, out, in}, e.randn(c.E*out*in, 0.1)))
		}
		g, u, d := ex("gate", c.inter, c.hidden), ex("up", c.inter, c.hidden), ex("down", c.hidden, c.inter)
		sc := e.weight(denseHost("scale", []int{c.E}, e.randn(c.E, 1), tensor.BF16))
		e.simpleStep(c.T)
		x := e.input(c.T, c.hidden, e.randn(c.T*c.hidden, 1))
		rx := e.input(c.T, c.hidden, e.randn(c.T*c.hidden, 1))
		p := backend.MoEParams{TopK: c.topk, Renorm: true, Act: backend.GELUTanh}
		name := fmt.Sprintf("MoERouted/%s/E%d/%dx%d/router=%s/top%d/T%d", c.k, c.E, c.hidden, c.inter, c.router, c.topk, c.T)
		out := e.poisoned(c.T, c.hidden)
		tm.MoERouted(out.a, x.a, rx.a, router.a, backend.Experts{Gate: g.a, Up: u.a, Down: d.a, Scale: sc.a}, p)
		rm.MoERouted(out.b, x.b, rx.b, router.b, backend.Experts{Gate: g.b, Up: u.b, Down: d.b, Scale: sc.b}, p)
		e.check(name, out, c.T)

		// Routing on x itself, unscaled, is plain MoE.
		same := e.poisoned(c.T, c.hidden)
		tm.MoERouted(same.a, x.a, x.a, router.a, backend.Experts{Gate: g.a, Up: u.a, Down: d.a}, p)
		e.ref.MoE(same.b, x.b, router.b, backend.Experts{Gate: g.b, Up: u.b, Down: d.b}, p)
		e.check(name+"/as-MoE", same, c.T)
	}
}
