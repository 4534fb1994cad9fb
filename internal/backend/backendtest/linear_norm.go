package backendtest

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

func init() {
	register("LinearNorm", runLinearNorm)
}

// runLinearNorm runs a decode step's one-row projection followed by the
// residual add and RMSNorm that read it, and a product on the norm's
// output: the sequence a backend may fuse (CUDA's add_rmsnorm, its norm
// folds). The add takes the product's output as its first or second
// operand, in place on the residual or into a new row; the widths cover
// the row-group kernels (K = 768, 2048), the 128-lane kernel, 8 bits, and
// a norm row longer than 4096 columns.
func runLinearNorm(e *env) {
	for _, c := range []struct {
		k       wkind
		K, cols int
	}{
		{wkind{tensor.BF16, 4, 64}, 4096, 4096},
		{wkind{tensor.BF16, 4, 64}, 4096, 2048},
		{wkind{tensor.BF16, 4, 64}, 2048, 2048},
		{wkind{tensor.F16, 4, 32}, 768, 1024},
		{wkind{tensor.BF16, 8, 64}, 4096, 4096},
		{wkind{tensor.BF16, 4, 128}, 1024, 8192},
	} {
		name := func(op string) string { return fmt.Sprintf("LinearNorm/%s/K=%d/cols=%d/%s", c.k, c.K, c.cols, op) }
		wo := e.weight(c.k.host("o", []int{c.cols, c.K}, e.randn(c.cols*c.K, 0.03)))
		wz := e.weight(c.k.host("z", []int{37, c.cols}, e.randn(37*c.cols, 0.03)))
		nw := e.weight(denseHost("norm", []int{c.cols}, e.randn(c.cols, 1), tensor.BF16))
		e.simpleStep(1)
		x := e.input(1, c.K, e.randn(c.K, 1))
		h := e.input(1, c.cols, e.randn(c.cols, 2))
		y, xn, z := e.poisoned(1, c.cols), e.poisoned(1, c.cols), e.poisoned(1, 37)
		y2, s2, xn2 := e.poisoned(1, c.cols), e.poisoned(1, c.cols), e.poisoned(1, c.cols)
		for i, be := range []backend.Backend{e.test, e.ref} {
			pick := func(p pair) backend.Tensor { return []backend.Tensor{p.a, p.b}[i] }
			pw := func(p wpair) backend.Weight { return []backend.Weight{p.a, p.b}[i] }
			// In place on the residual, the product's output second.
			be.Linear(pick(y), pick(x), pw(wo), nil)
			be.Add(pick(h), pick(h), pick(y))
			be.RMSNorm(pick(xn), pick(h), pw(nw), 1e-5)
			be.Linear(pick(z), pick(xn), pw(wz), nil)
			// Into a new row, the product's output first.
			be.Linear(pick(y2), pick(x), pw(wo), nil)
			be.Add(pick(s2), pick(y2), pick(h))
			be.RMSNorm(pick(xn2), pick(s2), pw(nw), 1e-5)
		}
		for _, o := range []struct {
			name string
			p    pair
		}{{"y", y}, {"residual", h}, {"norm", xn}, {"next", z}, {"y2", y2}, {"sum2", s2}, {"norm2", xn2}} {
			e.check(name(o.name), o.p, 1)
		}
	}
}
