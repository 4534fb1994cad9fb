package backendtest

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

func init() {
	register("LinearMany", runLinearMany)
	register("LinearFew", runLinearFew)
}

// linearRowsCase is one product of runLinearRows: rows activation rows by
// an N x K matrix.
type linearRowsCase struct {
	k    wkind
	rows int
	N, K int
}

// runLinearMany runs 4-bit products of 33 to 128 activation rows (batched
// decode: CUDA's qmm4 kernels) on shapes whose blocks split K: K of 2048
// and 640 (32 and 10 slabs of 64, so splits of several slabs, odd and even
// counts), weight rows not multiples of the 128-row block, groups of 32,
// 64 and 128, with and without bias, one matrix or three on one
// x (q, k, v joined into one launch).
func runLinearMany(e *env) {
	runLinearRows(e, "LinearMany", []linearRowsCase{
		{wkind{tensor.BF16, 4, 64}, 64, 300, 2048},
		{wkind{tensor.BF16, 4, 32}, 33, 1000, 640},
		{wkind{tensor.BF16, 4, 128}, 65, 300, 2048},
		{wkind{tensor.BF16, 4, 128}, 128, 1000, 640},
		{wkind{tensor.BF16, 4, 64}, 100, 129, 2048},
		{wkind{tensor.BF16, 4, 32}, 47, 1000, 640},
	})
}

// runLinearFew runs 4-bit products of 2 to 32 activation rows (a few
// sequences' decode: CUDA's qmma4 kernels) on shapes whose K is split over
// clusters of blocks (2048 to 4096: splits of 3 to 8, odd and even) and
// one that is not (640), weight rows not multiples of the 32-row block,
// groups of 64 and 128, with and without bias, one matrix or three on one
// x (q, k, v joined into one launch).
func runLinearFew(e *env) {
	runLinearRows(e, "LinearFew", []linearRowsCase{
		{wkind{tensor.BF16, 4, 64}, 8, 300, 2048},
		{wkind{tensor.BF16, 4, 128}, 5, 1000, 4096},
		{wkind{tensor.BF16, 4, 64}, 16, 129, 2048},
		{wkind{tensor.BF16, 4, 64}, 11, 1000, 1536},
		{wkind{tensor.BF16, 4, 128}, 2, 300, 640},
		{wkind{tensor.BF16, 4, 64}, 13, 1000, 2560},
		{wkind{tensor.BF16, 4, 64}, 24, 300, 2048},
		{wkind{tensor.BF16, 4, 128}, 32, 1000, 4096},
	})
}

// runLinearRows checks each case's product alone (with bias on every
// other case) and as q, k and v on one x.
func runLinearRows(e *env, prefix string, cases []linearRowsCase) {
	for i, c := range cases {
		name := func(op string) string {
			return fmt.Sprintf("%s/%s/rows=%d/%dx%d/%s", prefix, c.k, c.rows, c.N, c.K, op)
		}
		lin := func(tag string, n int) wpair {
			return e.weight(c.k.host(tag, []int{n, c.K}, e.randn(n*c.K, 0.03)))
		}
		wa, wk, wv := lin("a", c.N), lin("k", 136), lin("v", 72)
		var bias, kbias wpair
		if i%2 == 0 {
			bias = e.weight(denseHost("bias", []int{c.N}, e.randn(c.N, 0.1), tensor.F32))
			kbias = e.weight(denseHost("kbias", []int{136}, e.randn(136, 0.1), tensor.F32))
		}
		e.simpleStep(c.rows)
		x := e.input(c.rows, c.K, e.randn(c.rows*c.K, 1))
		one, q, k, v := e.poisoned(c.rows, c.N), e.poisoned(c.rows, c.N), e.poisoned(c.rows, 136), e.poisoned(c.rows, 72)
		for j, be := range []backend.Backend{e.test, e.ref} {
			pick := func(p pair) backend.Tensor { return []backend.Tensor{p.a, p.b}[j] }
			pw := func(p wpair) backend.Weight { return []backend.Weight{p.a, p.b}[j] }
			be.Linear(pick(one), pick(x), pw(wa), pw(bias))
			be.Scale(pick(x), 0.5) // a new x: the next products do not join the first
			be.Linear(pick(q), pick(x), pw(wa), nil)
			be.Linear(pick(k), pick(x), pw(wk), pw(kbias))
			be.Linear(pick(v), pick(x), pw(wv), nil)
		}
		for _, o := range []struct {
			name string
			p    pair
		}{{"one", one}, {"q", q}, {"k", k}, {"v", v}} {
			e.check(name(o.name), o.p, c.rows)
		}
	}
}
