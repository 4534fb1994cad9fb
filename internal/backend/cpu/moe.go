package cpu

import (
	"math"
	"sort"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// MoE routes each token to its top-k experts and runs only those. Tokens
// are grouped by expert so each selected expert's weights are read once
// per step, which is what keeps the cost proportional to top-k.
func (b *Backend) MoE(dst, x backend.Tensor, router backend.Weight, e backend.Experts, p backend.MoEParams) {
	out, in := dst.(*Tensor), x.(*Tensor)
	rw := router.(*weight)
	nExp := rw.shape[0]
	n, hidden := in.rows, in.cols
	logits := make([]float32, n*nExp)
	b.linear(logits, in.d, n, rw, 0)

	type pick struct {
		row int
		w   float32
	}
	byExpert := make([][]pick, nExp)
	idx := make([]int, nExp)
	prob := make([]float64, nExp)
	for r := range n {
		l := logits[r*nExp : (r+1)*nExp]
		m := math.Inf(-1)
		for _, v := range l {
			m = math.Max(m, float64(v))
		}
		var sum float64
		for i, v := range l {
			prob[i] = math.Exp(float64(v) - m)
			sum += prob[i]
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, c int) bool { return prob[idx[a]] > prob[idx[c]] })
		var top float64
		for _, i := range idx[:p.TopK] {
			top += prob[i]
		}
		for _, i := range idx[:p.TopK] {
			w := prob[i] / sum
			if p.Renorm {
				w = prob[i] / top
			}
			byExpert[i] = append(byExpert[i], pick{r, float32(w)})
		}
	}

	gw, uw, dw := e.Gate.(*weight), e.Up.(*weight), e.Down.(*weight)
	inter := gw.shape[1]
	clear(out.d[:n*hidden])
	for ex, picks := range byExpert {
		if len(picks) == 0 {
			continue
		}
		m := len(picks)
		xs := make([]float32, m*hidden)
		for i, pk := range picks {
			copy(xs[i*hidden:(i+1)*hidden], in.Row(pk.row))
		}
		g := make([]float32, m*inter)
		u := make([]float32, m*inter)
		b.linear(g, xs, m, gw, ex)
		b.linear(u, xs, m, uw, ex)
		gatedAct(g, g, u, p.Act)
		y := make([]float32, m*hidden)
		b.linear(y, g, m, dw, ex)
		for i, pk := range picks {
			o := out.Row(pk.row)
			for j, v := range y[i*hidden : (i+1)*hidden] {
				o[j] += pk.w * v
			}
		}
	}
}
