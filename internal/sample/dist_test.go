package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// refDist is an independent float64 reference of the whole pipeline: it
// penalises, scales, sorts everything, filters and renormalises, which is
// exactly what the sampler must emulate without the full sort.
func refDist(t *testing.T, logits []float32, p Params, prompt, gen []int32) []float64 {
	t.Helper()
	n := len(logits)
	l := make([]float64, n)
	for i, v := range logits {
		l[i] = float64(v)
		if v != v {
			l[i] = math.Inf(-1)
		}
	}
	refPenalties(l, p, prompt, gen)
	out := make([]float64, n)
	if p.Temperature < samplingEps {
		best := 0
		for i := range l {
			if l[i] > l[best] {
				best = i
			}
		}
		out[best] = 1
		return out
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case l[a] > l[b]:
			return -1
		case l[a] < l[b]:
			return 1
		}
		return 0
	})
	keep := n
	if p.TopK > 0 && p.TopK < n {
		keep = p.TopK
	}
	order = order[:keep]
	m := l[order[0]]
	z := 0.0
	for _, i := range order {
		out[i] = math.Exp((l[i] - m) / float64(p.Temperature))
		z += out[i]
	}
	if p.TopP > 0 && p.TopP < 1 {
		target := float64(p.TopP) * z
		above := 0.0
		for j, i := range order {
			// Guard against a boundary so thin that float32 rounding in
			// the sampler could legitimately decide it the other way.
			if d := math.Abs(above-target) / z; d < 1e-5 {
				t.Fatalf("test logits put token %d within %g of the top-p boundary; pick other numbers", i, d)
			}
			if above >= target {
				for _, r := range order[j:] {
					out[r] = 0
				}
				order = order[:j]
				break
			}
			above += out[i]
		}
	}
	if p.MinP > 0 {
		thr := float64(p.MinP) * out[order[0]]
		for _, i := range order {
			if out[i] < thr {
				if math.Abs(out[i]-thr)/thr < 1e-5 {
					t.Fatalf("token %d is on the min-p boundary; pick other numbers", i)
				}
				out[i] = 0
			}
		}
	}
	z = 0
	for _, v := range out {
		z += v
	}
	for i := range out {
		out[i] /= z
	}
	return out
}

// refPenalties is the textbook formula in float64: HF repetition penalty
// over the set prompt ∪ generated, then OpenAI frequency/presence over
// generated counts.
func refPenalties(l []float64, p Params, prompt, gen []int32) {
	n := int32(len(l))
	seen := map[int32]bool{}
	count := map[int32]int{}
	for _, t := range prompt {
		if t >= 0 && t < n {
			seen[t] = true
		}
	}
	for _, t := range gen {
		if t >= 0 && t < n {
			seen[t] = true
			count[t]++
		}
	}
	if rp := float64(p.RepetitionPenalty); rp > 0 && rp != 1 {
		for t := range seen {
			if l[t] > 0 {
				l[t] /= rp
			} else {
				l[t] *= rp
			}
		}
	}
	for t, c := range count {
		l[t] -= float64(p.FrequencyPenalty)*float64(c) + float64(p.PresencePenalty)
	}
}

// checkDist draws n tokens and compares the counts to want. Tokens with
// want == 0 must never appear. Every other count must be within a
// Bernstein bound of its expectation e at exponent a = 18 (about 6 sigma
// for large e, and valid in the Poisson-like tail of rare tokens, where a
// plain "5 sigma" is far too tight): |c - e| <= t with t^2 = 2a(e + t/3).
// Finally a chi-square over the tokens (rare ones pooled so every bin
// expects >= 5) must stay below its 1e-6 upper quantile (Wilson-Hilferty).
func checkDist(t *testing.T, draw func() int32, want []float64, n int) {
	t.Helper()
	counts := make([]int, len(want))
	for range n {
		id := draw()
		if id < 0 || int(id) >= len(want) {
			t.Fatalf("sampled id %d out of range", id)
		}
		counts[id]++
	}
	const a = 18.0
	chi2, df := 0.0, -1
	poolC, poolE := 0.0, 0.0
	for i, w := range want {
		c := float64(counts[i])
		if w == 0 {
			if counts[i] != 0 {
				t.Fatalf("token %d is excluded but was sampled %d times", i, counts[i])
			}
			continue
		}
		e := w * float64(n)
		tol := (2*a/3 + math.Sqrt(4*a*a/9+8*a*e)) / 2
		if d := math.Abs(c - e); d > tol {
			t.Errorf("token %d: count %.0f, expected %.1f (p %.6f); |diff| %.1f > %.1f",
				i, c, e, w, d, tol)
		}
		if e < 5 {
			poolC += c
			poolE += e
			continue
		}
		chi2 += (c - e) * (c - e) / e
		df++
	}
	if poolE > 0 {
		chi2 += (poolC - poolE) * (poolC - poolE) / poolE
		df++
	}
	if df > 0 {
		const z = 4.75 // one-sided normal quantile for 1e-6
		k := 2 / (9 * float64(df))
		lim := float64(df) * math.Pow(1-k+z*math.Sqrt(k), 3)
		if chi2 > lim {
			t.Errorf("chi-square %.1f with %d degrees of freedom exceeds %.1f", chi2, df, lim)
		}
	}
}

func testLogits(n int, seed uint64, scale float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * scale)
	}
	return l
}

func seed(v uint64) *uint64 { return &v }

func TestDistributions(t *testing.T) {
	small := testLogits(48, 1, 1.5)
	big := testLogits(3000, 2, 2)
	prompt := []int32{3, 5, 5, 9, 100000, -4}
	gen := []int32{5, 11, 11, 11, 17, 3}
	cases := []struct {
		name        string
		logits      []float32
		p           Params
		prompt, gen []int32
		draws       int
	}{
		{"plain T=1", small, Params{Temperature: 1}, nil, nil, 200000},
		{"T=0.5", small, Params{Temperature: 0.5}, nil, nil, 200000},
		{"T=1.7", small, Params{Temperature: 1.7}, nil, nil, 200000},
		{"top-k 5", small, Params{Temperature: 1, TopK: 5}, nil, nil, 200000},
		{"top-k 1", small, Params{Temperature: 1, TopK: 1}, nil, nil, 2000},
		{"top-k >= vocab", small, Params{Temperature: 1, TopK: 48}, nil, nil, 100000},
		{"top-p 0.8", small, Params{Temperature: 1, TopP: 0.8}, nil, nil, 200000},
		{"top-p 0.3 T=0.7", small, Params{Temperature: 0.7, TopP: 0.3}, nil, nil, 200000},
		{"min-p 0.1", small, Params{Temperature: 1, MinP: 0.1}, nil, nil, 200000},
		{"min-p 1", small, Params{Temperature: 1, MinP: 1}, nil, nil, 2000},
		{"k+p+min-p", small, Params{Temperature: 0.8, TopK: 12, TopP: 0.9, MinP: 0.05}, nil, nil, 200000},
		{"top-p then min-p", small, Params{Temperature: 1.3, TopP: 0.75, MinP: 0.2}, nil, nil, 200000},
		{"penalties T=1", small, Params{Temperature: 1, RepetitionPenalty: 1.3, PresencePenalty: 0.4, FrequencyPenalty: 0.3}, prompt, gen, 200000},
		{"penalties + top-p", small, Params{Temperature: 0.9, TopP: 0.85, RepetitionPenalty: 0.8, FrequencyPenalty: -0.5}, prompt, gen, 200000},
		{"big plain", big, Params{Temperature: 1}, nil, nil, 120000},
		{"big top-p 0.9", big, Params{Temperature: 1, TopP: 0.9}, nil, nil, 120000},
		{"big top-p 0.5 T=0.6", big, Params{Temperature: 0.6, TopP: 0.5}, nil, nil, 120000},
		{"big top-k 50", big, Params{Temperature: 1, TopK: 50}, nil, nil, 120000},
		{"big top-k 2000 (quickselect) + top-p", big, Params{Temperature: 1, TopK: 2000, TopP: 0.6}, nil, nil, 120000},
		{"big min-p 0.02", big, Params{Temperature: 1, MinP: 0.02}, nil, nil, 120000},
		{"big penalties + top-p", big, Params{Temperature: 1.2, TopP: 0.7, RepetitionPenalty: 1.2, PresencePenalty: 1}, prompt, gen, 120000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() {
				tc.draws /= 4 // the bounds scale with the count; still sound
			}
			tc.p.Seed = seed(42)
			want := refDist(t, tc.logits, tc.p, tc.prompt, tc.gen)
			s := New(tc.p, len(tc.logits))
			checkDist(t, func() int32 {
				return s.Sample(tc.logits, tc.prompt, tc.gen).ID
			}, want, tc.draws)
		})
	}
}

// TestDistributionAcrossSeeds takes the first draw of many independently
// seeded samplers: the seed-to-stream mapping must not bias the first token.
func TestDistributionAcrossSeeds(t *testing.T) {
	logits := testLogits(32, 3, 1.2)
	for _, p := range []Params{
		{Temperature: 1, TopP: 0.7},
		{Temperature: 0.8, TopK: 6, MinP: 0.1},
	} {
		want := refDist(t, logits, p, nil, nil)
		var i uint64
		checkDist(t, func() int32 {
			q := p
			q.Seed = seed(i)
			i++
			return New(q, len(logits)).Sample(logits, nil, nil).ID
		}, want, 40000)
	}
}

func TestTemperatureSharpens(t *testing.T) {
	logits := testLogits(40, 4, 1)
	top := Greedy(logits)
	prev := -1.0
	for _, temp := range []float32{2, 1.5, 1, 0.5, 0.25} {
		s := New(Params{Temperature: temp, Seed: seed(1)}, len(logits))
		hits := 0
		const n = 50000
		for range n {
			if s.Sample(logits, nil, nil).ID == top {
				hits++
			}
		}
		f := float64(hits) / n
		want := refDist(t, logits, Params{Temperature: temp}, nil, nil)[top]
		if math.Abs(f-want) > 5*math.Sqrt(want*(1-want)/n) {
			t.Errorf("T=%v: argmax frequency %.4f, want %.4f", temp, f, want)
		}
		if f <= prev {
			t.Errorf("T=%v: argmax frequency %.4f did not grow from %.4f at higher T", temp, f, prev)
		}
		prev = f
	}
}

func TestMaskedTokensNeverSampled(t *testing.T) {
	nan := float32(math.NaN())
	logits := []float32{negInf, 1, nan, 0.5, negInf, 2, nan, -1}
	for _, p := range []Params{
		{Temperature: 2},
		{Temperature: 2, TopP: 0.99},
		{Temperature: 2, TopK: 7},
		{Temperature: 2, TopK: 2000},
		{Temperature: 2, MinP: 1e-6},
	} {
		p.Seed = seed(9)
		want := refDist(t, logits, p, nil, nil)
		s := New(p, len(logits))
		checkDist(t, func() int32 { return s.Sample(logits, nil, nil).ID }, want, 50000)
	}
	// Nothing left at all: fall back to the argmax rule (index 0).
	all := []float32{negInf, nan, negInf}
	if got := New(Params{Temperature: 1}, 3).Sample(all, nil, nil).ID; got != 0 {
		t.Errorf("all masked: got %d, want 0", got)
	}
}
