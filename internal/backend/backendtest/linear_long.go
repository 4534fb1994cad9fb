package backendtest

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

func init() {
	register("LinearLong", runLinearLong)
}

// runLinearLong runs one-row products with the long rows of 8B-class
// models (K = 4096, 8192, 14336) in the three forms a decode step records:
// one matrix, three on one x (q, k, v) and gate/up with the gated
// activation. The row counts are small and not multiples of 8, so the
// last row group is partial; at K=14336 a lane has 3 or 4 chunks a row.
func runLinearLong(e *env) {
	for _, c := range []struct {
		k    wkind
		K, N int
	}{
		{wkind{tensor.BF16, 4, 64}, 4096, 203},
		{wkind{tensor.BF16, 4, 128}, 8192, 77},
		{wkind{tensor.BF16, 4, 32}, 14336, 45},
		{wkind{tensor.BF16, 8, 64}, 4096, 61},
	} {
		lin := func(name string, n int) wpair {
			return e.weight(c.k.host(name, []int{n, c.K}, e.randn(n*c.K, 0.03)))
		}
		name := func(op string) string { return fmt.Sprintf("LinearLong/%s/K=%d/%s", c.k, c.K, op) }
		wq, wk, wv, wu := lin("q", c.N), lin("k", 19), lin("v", 19), lin("u", c.N)
		bias := e.weight(denseHost("bias", []int{c.N}, e.randn(c.N, 0.1), tensor.F32))
		e.simpleStep(1)
		x := e.input(1, c.K, e.randn(c.K, 1))
		one, q, k, v := e.poisoned(1, c.N), e.poisoned(1, c.N), e.poisoned(1, 19), e.poisoned(1, 19)
		g, u, act := e.poisoned(1, c.N), e.poisoned(1, c.N), e.poisoned(1, c.N)
		for i, be := range []backend.Backend{e.test, e.ref} {
			pick := func(p pair) backend.Tensor { return []backend.Tensor{p.a, p.b}[i] }
			pw := func(p wpair) backend.Weight { return []backend.Weight{p.a, p.b}[i] }
			be.Linear(pick(one), pick(x), pw(wq), pw(bias))
			be.Add(pick(x), pick(x), pick(x)) // a new x: the next products do not join the first
			be.Linear(pick(q), pick(x), pw(wq), nil)
			be.Linear(pick(k), pick(x), pw(wk), nil)
			be.Linear(pick(v), pick(x), pw(wv), nil)
			be.Scale(pick(x), 0.5)
			be.Linear(pick(g), pick(x), pw(wq), pw(bias))
			be.Linear(pick(u), pick(x), pw(wu), nil)
			be.GatedAct(pick(act), pick(g), pick(u), backend.SiLU)
		}
		for _, o := range []struct {
			name string
			p    pair
		}{{"one", one}, {"q", q}, {"k", k}, {"v", v}, {"gate", g}, {"up", u}, {"act", act}} {
			e.check(name(o.name), o.p, 1)
		}
	}
}
