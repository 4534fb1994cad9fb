package backendtest

import (
	"fmt"
	"math"
	"slices"

	"github.com/mlxcel/mlxcel/internal/backend"
)

func init() {
	register("SampleRowsDistribution", runSampleRowsDistribution)
}

// runSampleRowsDistribution draws 20000 tokens from a 40-token row with a
// RowSampler (many rows of the same logits, each its own counter) and
// checks the counts against the float64 distribution the knobs define:
// excluded tokens never appear, and a chi-square over the others stays
// below its 1e-6 quantile.
func runSampleRowsDistribution(e *env) {
	rs, ok := e.test.(backend.RowSampler)
	if !ok {
		e.t.Skipf("%s samples on the host", e.test.Name())
	}
	const vocab, rows, calls = 40, 250, 80
	logits := e.randn(vocab, 1.5)
	data := make([]float32, 0, rows*vocab)
	for range rows {
		data = append(data, logits...)
	}
	hist := []backend.TokenCount{{ID: 3, Output: 2}, {ID: 5}, {ID: 11, Output: 1}, {ID: 17, Output: 3}}
	for _, p := range []backend.SampleRow{
		{Temperature: 1},
		{Temperature: 0.7, TopK: 6},
		{Temperature: 1, TopP: 0.8},
		{Temperature: 1.3, MinP: 0.1},
		{Temperature: 0.8, TopK: 12, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.3, FrequencyPenalty: 0.5, PresencePenalty: 0.3},
	} {
		p.Seed = e.rng.Uint64()
		p.History = hist
		want := refSampleDist(logits, p)
		e.simpleStep(rows)
		x := e.input(rows, vocab, data)
		counts := make([]int, vocab)
		rs2 := make([]backend.SampleRow, rows)
		for c := range calls {
			for i := range rs2 {
				rs2[i] = p
				rs2[i].Counter = uint64(c*rows + i)
			}
			got, err := rs.SampleRows(x.a, rs2)
			if err != nil {
				e.fatalf("%s: SampleRows: %v", e.test.Name(), err)
			}
			for _, g := range got {
				if g.ID < 0 || int(g.ID) >= vocab {
					e.fatalf("%+v: token %d outside the vocabulary", p, g.ID)
				}
				counts[g.ID]++
			}
		}
		if msg := chiSquare(counts, want); msg != "" {
			e.t.Errorf("%+v: %s", p, msg)
		}
	}
}

// refSampleDist is the distribution of one row's token in float64:
// penalties, temperature, top-k, top-p over the top-k, min-p against the
// top token, renormalised (internal/sample's rule, written out plainly).
func refSampleDist(logits []float32, r backend.SampleRow) []float64 {
	n := len(logits)
	l := make([]float64, n)
	for i, v := range logits {
		l[i] = float64(v)
	}
	for _, h := range r.History {
		if h.ID < 0 || int(h.ID) >= n {
			continue
		}
		v := l[h.ID]
		if rp := float64(r.RepetitionPenalty); rp > 0 && rp != 1 {
			if v > 0 {
				v /= rp
			} else {
				v *= rp
			}
		}
		if h.Output > 0 {
			v -= float64(r.FrequencyPenalty)*float64(h.Output) + float64(r.PresencePenalty)
		}
		l[h.ID] = v
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
	if r.TopK > 0 && r.TopK < n {
		order = order[:r.TopK]
	}
	out := make([]float64, n)
	z := 0.0
	for _, i := range order {
		out[i] = math.Exp((l[i] - l[order[0]]) / float64(r.Temperature))
		z += out[i]
	}
	if r.TopP > 0 && r.TopP < 1 {
		above := 0.0
		for j, i := range order {
			if above >= float64(r.TopP)*z {
				for _, d := range order[j:] {
					out[d] = 0
				}
				break
			}
			above += out[i]
		}
	}
	if r.MinP > 0 {
		for _, i := range order {
			if out[i] < float64(r.MinP) {
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

// chiSquare compares counts with the probabilities want: "" when excluded
// tokens never appear and the chi-square (bins expecting < 5 pooled)
// stays below its 1e-6 upper quantile (Wilson-Hilferty), else what broke.
func chiSquare(counts []int, want []float64) string {
	n := 0
	for _, c := range counts {
		n += c
	}
	chi2, df := 0.0, -1
	poolC, poolE := 0.0, 0.0
	for i, w := range want {
		c := float64(counts[i])
		if w == 0 {
			if counts[i] != 0 {
				return fmt.Sprintf("token %d is excluded but was sampled %d times", i, counts[i])
			}
			continue
		}
		ex := w * float64(n)
		if ex < 5 {
			poolC += c
			poolE += ex
			continue
		}
		chi2 += (c - ex) * (c - ex) / ex
		df++
	}
	if poolE > 0 {
		chi2 += (poolC - poolE) * (poolC - poolE) / poolE
		df++
	}
	if df <= 0 {
		return ""
	}
	const z = 4.75 // one-sided normal quantile for 1e-6
	k := 2 / (9 * float64(df))
	if lim := float64(df) * math.Pow(1-k+z*math.Sqrt(k), 3); chi2 > lim {
		return fmt.Sprintf("chi-square %.1f with %d degrees of freedom exceeds %.1f", chi2, df, lim)
	}
	return ""
}
