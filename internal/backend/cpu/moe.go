package cpu

import (
	"math"
	"sync"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// moeScratch is one MoE call's routing tables and activations. Calls take
// one from a pool so a steady decode loop allocates nothing per layer.
type moeScratch struct {
	logits      []float32
	prob        []float64
	top         []int
	count, next []int
	tokW        []float32 // routing weights in token order
	rows        []int     // token row of each assignment, grouped by expert
	wts         []float32 // its routing weight
	xs, g, u, y []float32
}

var moePool = sync.Pool{New: func() any { return new(moeScratch) }}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// MoE routes each token to its top-k experts and runs only those. Routing
// is a softmax over all experts' logits (in float64), the k most probable
// kept (ties to the lower index) and, with Renorm, rescaled to sum to 1.
// Assignments are then grouped by expert, so each selected expert's
// weights are read once per step for all the tokens that chose it: the
// work is n*k expert-rows, and the number of experts only enters through
// the router matmul and the routing scan. Outputs accumulate in ascending
// expert order, so results do not depend on thread count.
func (b *Backend) MoE(dst, x backend.Tensor, router backend.Weight, e backend.Experts, p backend.MoEParams) {
	b.MoERouted(dst, x, x, router, e, p)
}

// MoERouted is MoE with the router reading routerX (backend.RoutedMoE).
func (b *Backend) MoERouted(dst, x, routerX backend.Tensor, router backend.Weight, e backend.Experts, p backend.MoEParams) {
	out, in, rin := dst.(*Tensor), x.(*Tensor), routerX.(*Tensor)
	if rin.rows != in.rows {
		panic("cpu: MoE router input rows differ from the experts' input")
	}
	rw := router.(*weight)
	nExp := rw.shape[0]
	n, hidden := in.rows, in.cols
	k := p.TopK
	if k <= 0 || k > nExp {
		panic("cpu: MoE top-k outside 1..experts")
	}
	s := moePool.Get().(*moeScratch)
	defer moePool.Put(s)

	s.logits = grow(s.logits, n*nExp)
	b.linear(s.logits, rin.d, n, rw, 0)
	addBias(s.logits, n, e.RouterBias, 0)

	// Route: per token, the top-k experts and their weights, recorded as
	// (expert, row, weight) in token order, then counting-sorted by
	// expert.
	s.prob = grow(s.prob, nExp)
	s.top = grow(s.top, n*k)
	s.tokW = grow(s.tokW, n*k)
	tw := s.tokW
	s.count = grow(s.count, nExp)
	clear(s.count)
	for r := range n {
		top, w := s.top[r*k:(r+1)*k], tw[r*k:(r+1)*k]
		route(s.logits[r*nExp:(r+1)*nExp], s.prob, top, w, p.Renorm)
		for i, ex := range top {
			s.count[ex]++
			if e.Scale != nil {
				w[i] *= e.Scale.(*weight).dense[ex]
			}
		}
	}
	s.next = grow(s.next, nExp)
	acc := 0
	for ex, c := range s.count {
		s.next[ex] = acc
		acc += c
	}
	s.rows = grow(s.rows, n*k)
	s.wts = grow(s.wts, n*k)
	for i, ex := range s.top {
		j := s.next[ex]
		s.next[ex]++
		s.rows[j], s.wts[j] = i/k, tw[i]
	}

	gw, uw, dw := e.Gate.(*weight), e.Up.(*weight), e.Down.(*weight)
	inter := gw.shape[1]
	// Expert parallel: only experts [lo, hi) are held here; the others'
	// assignments are skipped (another rank adds them).
	lo, hi := e.Lo, e.Lo+gw.shape[0]
	if lo < 0 || hi > nExp {
		panic("cpu: MoE experts outside the router's")
	}
	maxRows := 0
	for ex, c := range s.count {
		if ex >= lo && ex < hi {
			maxRows = max(maxRows, c)
		}
	}
	s.xs = grow(s.xs, maxRows*hidden)
	s.g = grow(s.g, maxRows*inter)
	s.u = grow(s.u, maxRows*inter)
	s.y = grow(s.y, maxRows*hidden)
	clear(out.d[:n*hidden])
	start := 0
	for ex, m := range s.count {
		rows, wts := s.rows[start:start+m], s.wts[start:start+m]
		start += m
		if m == 0 || ex < lo || ex >= hi {
			continue
		}
		le := ex - lo // the expert's index in the held weights
		xs, g, u, y := s.xs[:m*hidden], s.g[:m*inter], s.u[:m*inter], s.y[:m*hidden]
		for i, r := range rows {
			copy(xs[i*hidden:(i+1)*hidden], in.Row(r))
		}
		b.linear(g, xs, m, gw, le)
		b.linear(u, xs, m, uw, le)
		addBias(g, m, e.GateBias, le)
		addBias(u, m, e.UpBias, le)
		if p.Act == backend.SwiGLUClamped {
			swigluClamped(g, g, u, p.Alpha, p.Limit)
		} else {
			gatedAct(g, g, u, p.Act)
		}
		b.linear(y, g, m, dw, le)
		addBias(y, m, e.DownBias, le)
		for i, r := range rows {
			o, w := out.Row(r), wts[i]
			for j, v := range y[i*hidden : (i+1)*hidden] {
				o[j] += w * v
			}
		}
	}
}

// route writes the len(top) most probable experts of one token's router
// logits to top (most probable first) and their weights to w: softmax
// probabilities, or with renorm those divided by their sum. Selection
// keeps a sorted top list, O(experts*k), which beats sorting all experts
// for the small k models use.
func route(logits []float32, prob []float64, top []int, w []float32, renorm bool) {
	k := len(top)
	m := math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for i, v := range logits {
		prob[i] = math.Exp(float64(v) - m)
		sum += prob[i]
	}
	filled := 0
	for i, pr := range prob {
		if filled == k && pr <= prob[top[k-1]] {
			continue
		}
		// Strict comparisons keep the earlier expert ahead on ties.
		j := min(filled, k-1)
		for j > 0 && pr > prob[top[j-1]] {
			top[j] = top[j-1]
			j--
		}
		top[j] = i
		filled = min(filled+1, k)
	}
	norm := sum
	if renorm {
		norm = 0
		for _, ex := range top {
			norm += prob[ex]
		}
	}
	for i, ex := range top {
		w[i] = float32(prob[ex] / norm)
	}
}

// addBias adds row ex of a stacked [experts, cols] bias (nil: none) to each
// of the rows of x.
func addBias(x []float32, rows int, bias backend.Weight, ex int) {
	if bias == nil {
		return
	}
	bw := bias.(*weight)
	cols := bw.shape[len(bw.shape)-1]
	bv := bw.dense[ex*cols : (ex+1)*cols]
	for r := range rows {
		row := x[r*cols : (r+1)*cols]
		for i := range row {
			row[i] += bv[i]
		}
	}
}
