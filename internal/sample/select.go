package sample

import (
	"math"
	"math/bits"
	"slices"
)

// cand is a token with a score: a logit during top-k selection, an
// unnormalised probability afterwards.
type cand struct {
	v  float32
	id int32
}

// before is the rank order used everywhere: higher score first, lower id
// first on equal scores. It is a strict total order on distinct ids, so
// selection results are deterministic and ties never need special cases.
// Scores are never NaN here (NaN logits are read as -Inf).
func before(a, b cand) bool {
	return a.v > b.v || (a.v == b.v && a.id < b.id)
}

func cmpRank(a, b cand) int {
	if before(a, b) {
		return -1
	}
	if before(b, a) {
		return 1
	}
	return 0
}

var negInf = float32(math.Inf(-1))

// noNaN maps NaN to -Inf so that masked-out or broken logits rank last.
func noNaN(v float32) float32 {
	if v != v {
		return negInf
	}
	return v
}

// heapTopK fills dst[:k] with the k top-ranked entries of l (unordered) using
// a size-k min-heap whose root is the worst kept entry. After the first k
// entries a token only needs one float compare against the root, so for
// small k this is a single streaming pass over the vocabulary.
// k must be in [1, len(l)].
func heapTopK(dst []cand, l []float32, k int) []cand {
	h := dst[:k]
	for i := range h {
		h[i] = cand{noNaN(l[i]), int32(i)}
	}
	// Heapify with "worst at the root": parent is ranked after its children.
	for i := k/2 - 1; i >= 0; i-- {
		siftWorst(h, i)
	}
	root := h[0].v
	for i := k; i < len(l); i++ {
		v := l[i]
		// Later ids lose ties, so only a strictly larger score can enter.
		// NaN compares false and never enters.
		if v > root {
			h[0] = cand{v, int32(i)}
			siftWorst(h, 0)
			root = h[0].v
		}
	}
	return h
}

// siftWorst restores the heap property below i: every parent ranks after
// (is worse than) its children.
func siftWorst(h []cand, i int) {
	n := len(h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && before(h[c], h[c+1]) {
			c++ // the worse child
		}
		if !before(h[i], h[c]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// partition partitions a[lo:hi] (hi-lo >= 3) around a median-of-three pivot.
// On return a[lo:p] rank before a[p], a[p+1:hi] after it, and mass is the sum
// of the scores in a[lo:p].
func partition(a []cand, lo, hi int) (p int, mass float64) {
	mid := lo + (hi-lo)/2
	last := hi - 1
	// Order a[lo], a[mid], a[last] so the median ends up at a[mid].
	if before(a[mid], a[lo]) {
		a[mid], a[lo] = a[lo], a[mid]
	}
	if before(a[last], a[mid]) {
		a[last], a[mid] = a[mid], a[last]
		if before(a[mid], a[lo]) {
			a[mid], a[lo] = a[lo], a[mid]
		}
	}
	a[mid], a[last] = a[last], a[mid]
	pv := a[last]
	i := lo
	for j := lo; j < last; j++ {
		if before(a[j], pv) {
			a[i], a[j] = a[j], a[i]
			mass += float64(a[i].v)
			i++
		}
	}
	a[i], a[last] = a[last], a[i]
	return i, mass
}

// depthLimit bounds quickselect rounds before falling back to a sort, so
// an adversarial input costs O(n log n), not O(n^2).
func depthLimit(n int) int { return 2*bits.Len(uint(n)) + 8 }

// selectTopK reorders a so that a[:k] holds its k top-ranked entries
// (unordered). Expected O(len(a)).
func selectTopK(a []cand, k int) {
	if k <= 0 || k >= len(a) {
		return
	}
	lo, hi := 0, len(a)
	for depth := depthLimit(len(a)); hi-lo > 16; depth-- {
		if depth == 0 {
			slices.SortFunc(a[lo:hi], cmpRank)
			return
		}
		p, _ := partition(a, lo, hi)
		switch {
		case p == k || p+1 == k:
			return
		case p > k:
			hi = p
		default:
			lo = p + 1
		}
	}
	slices.SortFunc(a[lo:hi], cmpRank)
}

// topPPrefix implements the nucleus rule on scores a[i].v >= 0 without
// sorting everything: in rank order, token j is kept iff the mass of the
// tokens ranked strictly before it is < target (HF/vLLM: drop where the
// ascending cumulative sum is <= 1-p, which always keeps the top token and
// the token that crosses p). It reorders a so the kept tokens are a[:n] and
// returns n >= 1 (for target > 0). This is a quickselect that descends
// into whichever side contains the crossing point, carrying the mass of
// everything already known to be kept: expected O(len(a)).
func topPPrefix(a []cand, target float64) int {
	lo, hi := 0, len(a)
	acc := 0.0 // mass of a[:lo], all kept and ranked before a[lo:hi]
	for depth := depthLimit(len(a)); hi-lo > 16 && depth > 0; depth-- {
		p, m := partition(a, lo, hi)
		if acc+m >= target {
			hi = p // the pivot and everything after it are dropped
			continue
		}
		acc += m + float64(a[p].v)
		if acc >= target {
			return p + 1
		}
		lo = p + 1
	}
	seg := a[lo:hi]
	slices.SortFunc(seg, cmpRank)
	for i, c := range seg {
		if acc >= target {
			return lo + i
		}
		acc += float64(c.v)
	}
	return hi
}
