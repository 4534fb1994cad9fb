package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randCands makes scores with many exact ties (few distinct values) so the
// id tie-break is exercised, or continuous ones.
func randCands(r *rand.Rand, n int, ties bool) []cand {
	c := make([]cand, n)
	for i := range c {
		v := float32(r.ExpFloat64())
		if ties {
			v = float32(r.IntN(5))
		}
		c[i] = cand{v, int32(i)}
	}
	r.Shuffle(n, func(i, j int) { c[i], c[j] = c[j], c[i] })
	return c
}

func sortedIDs(c []cand) []int32 {
	ids := make([]int32, len(c))
	for i, x := range c {
		ids[i] = x.id
	}
	slices.Sort(ids)
	return ids
}

func TestSelectTopKMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1, 2, 3, 17, 100, 1000, 5000} {
		for _, ties := range []bool{false, true} {
			for range 5 {
				a := randCands(r, n, ties)
				ref := slices.Clone(a)
				slices.SortFunc(ref, cmpRank)
				k := 1 + r.IntN(n)
				selectTopK(a, k)
				if !slices.Equal(sortedIDs(a[:k]), sortedIDs(ref[:k])) {
					t.Fatalf("n=%d k=%d ties=%v: quickselect set differs from sort", n, k, ties)
				}
				// The heap version works on a logit slice indexed by id.
				l := make([]float32, n)
				for _, x := range a {
					l[x.id] = x.v
				}
				h := heapTopK(make([]cand, k), l, k)
				if !slices.Equal(sortedIDs(h), sortedIDs(ref[:k])) {
					t.Fatalf("n=%d k=%d ties=%v: heap set differs from sort", n, k, ties)
				}
			}
		}
	}
}

func TestHeapTopKNaN(t *testing.T) {
	nan := float32(math.NaN())
	l := []float32{nan, 1, nan, negInf, 0, nan}
	h := heapTopK(make([]cand, 4), l, 4)
	slices.SortFunc(h, cmpRank)
	want := []int32{1, 4, 0, 2} // NaN ranks as -Inf; lower id wins ties
	if got := sortedIDs(h); !slices.Equal(got, []int32{0, 1, 2, 4}) {
		t.Fatalf("ids %v", got)
	}
	for i, x := range h {
		if x.id != want[i] {
			t.Fatalf("order %v, want ids %v", h, want)
		}
	}
}

func TestTopPPrefixMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, n := range []int{1, 2, 16, 17, 50, 1000, 20000} {
		for _, ties := range []bool{false, true} {
			for range 6 {
				a := randCands(r, n, ties)
				ref := slices.Clone(a)
				slices.SortFunc(ref, cmpRank)
				total := 0.0
				for _, x := range a {
					total += float64(x.v)
				}
				if total == 0 {
					continue
				}
				target := total * (0.05 + 0.9*r.Float64())
				want, above := len(ref), 0.0
				for i, x := range ref {
					if above >= target {
						want = i
						break
					}
					above += float64(x.v)
				}
				got := topPPrefix(a, target)
				if got != want || !slices.Equal(sortedIDs(a[:got]), sortedIDs(ref[:want])) {
					t.Fatalf("n=%d ties=%v: kept %d tokens, want %d", n, ties, got, want)
				}
			}
		}
	}
	// A target above the total keeps everything; a tiny one keeps the top.
	a := []cand{{1, 0}, {2, 1}, {3, 2}}
	if got := topPPrefix(a, 100); got != 3 {
		t.Errorf("huge target kept %d", got)
	}
	if got := topPPrefix(a, 1e-9); got != 1 || a[0].id != 2 {
		t.Errorf("tiny target kept %d, first %v", got, a[0])
	}
}

func TestExpNeg(t *testing.T) {
	if expNeg(0) != 1 {
		t.Fatalf("expNeg(0) = %v, want exactly 1", expNeg(0))
	}
	for _, x := range []float32{negInf, float32(math.NaN()), -87.4, -1000} {
		if e := expNeg(float64(x)); e != 0 {
			t.Errorf("expNeg(%v) = %v, want 0", x, e)
		}
	}
	var xs []float32
	for x := float32(0); x > -87.3; x -= 0.000731 {
		xs = append(xs, x)
	}
	dst := make([]float32, len(xs))
	expStore(dst, xs, 0, 1, 0)
	worst := 0.0
	for i, x := range xs {
		want := math.Exp(float64(x))
		if rel := math.Abs(float64(expNeg(float64(x)))-want) / want; rel > worst {
			worst = rel
		}
		// The unrolled loops must compute the very same numbers, so the
		// dense and top-k paths agree bit for bit.
		if dst[i] != expNeg(float64(x)) {
			t.Fatalf("expStore(%v) = %v, expNeg = %v", x, dst[i], expNeg(float64(x)))
		}
	}
	// float32 rounding alone is 6e-8; the quadratic adds at most 2.6e-8.
	if worst > 1e-7 {
		t.Errorf("worst relative error %g", worst)
	}
	var hist histogram
	dst2 := make([]float32, len(xs))
	if s1, s2 := expStoreHist(dst2, xs, 0, 1, &hist), expStore(dst, xs, 0, 1, 0); s1 != s2 || !slices.Equal(dst, dst2) {
		t.Errorf("expStoreHist disagrees with expStore: %v vs %v", s1, s2)
	}
	sum := 0.0
	for b := range nBuckets {
		sum += hist.mass(b)
	}
	if z := expSum(xs, 0); math.Abs(z-sum) > 1e-9*z {
		t.Errorf("expSum %v, histogram total %v", z, sum)
	}
}

func TestBucketsMonotone(t *testing.T) {
	if bucketOf(1) != 0 || bucketOf(0) != 508 {
		t.Fatalf("bucketOf(1) = %d, bucketOf(0) = %d", bucketOf(1), bucketOf(0))
	}
	prev := uint32(0)
	// Stop in the normal range: repeated scaling of a subnormal can get
	// stuck on a fixed point. Subnormals are spot-checked below.
	for e := float32(1); e > 1e-37; e *= 0.97 {
		b := bucketOf(e)
		if b < prev || b >= nBuckets {
			t.Fatalf("bucketOf(%v) = %d after %d", e, b, prev)
		}
		prev = b
	}
	for _, e := range []float32{1e-39, 1e-42, 1e-45} {
		if b := bucketOf(e); b < prev || b > 508 {
			t.Fatalf("bucketOf(%v) = %d after %d", e, b, prev)
		}
	}
}
