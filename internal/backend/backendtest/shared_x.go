package backendtest

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

func init() {
	register("LinearSharedX", runLinearSharedX)
}

// runLinearSharedX runs several many-row products on one x, as a layer's
// q, k and v (and gate and up) do, then changes x and multiplies again: a
// backend that converts x once for consecutive products (CUDA rounds it
// to bf16 for cuBLAS) must notice the change.
func runLinearSharedX(e *env) {
	const rows, K = 40, 256
	for _, k := range []wkind{{tensor.BF16, 4, 64}, {tensor.BF16, 0, 0}} {
		lin := func(name string, n int) wpair {
			return e.weight(k.host(name, []int{n, K}, e.randn(n*K, 0.05)))
		}
		w1, w2, w3 := lin("w1", 96), lin("w2", 64), lin("w3", 96)
		bias := e.weight(denseHost("bias", []int{96}, e.randn(96, 0.1), tensor.F32))
		e.simpleStep(rows)
		x := e.input(rows, K, e.randn(rows*K, 1))
		a, b, c, d := e.poisoned(rows, 96), e.poisoned(rows, 64), e.poisoned(rows, 96), e.poisoned(rows, 96)
		e.test.Linear(a.a, x.a, w1.a, bias.a)
		e.test.Linear(b.a, x.a, w2.a, nil)
		e.test.Linear(d.a, x.a, w3.a, nil)
		e.test.Add(x.a, x.a, x.a)
		e.test.Linear(c.a, x.a, w3.a, nil)
		e.ref.Linear(a.b, x.b, w1.b, bias.b)
		e.ref.Linear(b.b, x.b, w2.b, nil)
		e.ref.Linear(d.b, x.b, w3.b, nil)
		e.ref.Add(x.b, x.b, x.b)
		e.ref.Linear(c.b, x.b, w3.b, nil)
		for _, o := range []struct {
			name string
			p    pair
		}{{"first", a}, {"second", b}, {"third", d}, {"after-add", c}} {
			e.check(fmt.Sprintf("Linear/shared-x/%s/%s", k, o.name), o.p, rows)
		}

		// A product right after the op that wrote its x: a norm, an
		// add+norm and a gated activation (CUDA has them write x's bf16
		// copy as well), and after the norm two more products on its
		// output (q, k, v), which reuse that copy.
		nw := e.weight(denseHost("nw", []int{K}, e.randn(K, 0.3), tensor.F32))
		g, u := e.input(rows, K, e.randn(rows*K, 1)), e.input(rows, K, e.randn(rows*K, 1))
		h, act := e.poisoned(rows, K), e.poisoned(rows, K)
		p1, p2, p3 := e.poisoned(rows, 96), e.poisoned(rows, 64), e.poisoned(rows, 96)
		q2, q3 := e.poisoned(rows, 64), e.poisoned(rows, 96)
		for i, be := range []backend.Backend{e.test, e.ref} {
			pick := func(p pair) backend.Tensor { return []backend.Tensor{p.a, p.b}[i] }
			pw := func(p wpair) backend.Weight { return []backend.Weight{p.a, p.b}[i] }
			be.RMSNorm(pick(h), pick(g), pw(nw), 1e-5)
			be.Linear(pick(p1), pick(h), pw(w1), pw(bias))
			be.Linear(pick(q2), pick(h), pw(w2), nil)
			be.Linear(pick(q3), pick(h), pw(w3), nil)
			be.Add(pick(g), pick(g), pick(u))
			be.RMSNorm(pick(h), pick(g), pw(nw), 1e-5)
			be.Linear(pick(p2), pick(h), pw(w2), nil)
			be.GatedAct(pick(act), pick(g), pick(u), backend.SiLU)
			be.Linear(pick(p3), pick(act), pw(w3), nil)
		}
		for _, o := range []struct {
			name string
			p    pair
		}{{"after-norm", p1}, {"after-norm-2", q2}, {"after-norm-3", q3}, {"after-add-norm", p2}, {"after-act", p3}, {"norm", h}, {"act", act}} {
			e.check(fmt.Sprintf("Linear/producer-x/%s/%s", k, o.name), o.p, rows)
		}
	}
}
