package backendtest

import (
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
)

func init() {
	register("SampleRows", runSampleRows)
}

// sampleCases are the per-row knobs the SampleRows case cycles through:
// each filter alone and together, with and without penalties, greedy with
// penalties, top-k 1 (which must be the argmax whatever the draw), and
// logprobs.
var sampleCases = []backend.SampleRow{
	{Temperature: 0},
	{Temperature: 0, RepetitionPenalty: 1.3, PresencePenalty: 0.5, FrequencyPenalty: 0.7, Logprobs: 3},
	{Temperature: 1},
	{Temperature: 0.7, TopK: 1},
	{Temperature: 1, TopK: 5, Logprobs: 5},
	{Temperature: 0.8, TopK: 40, TopP: 0.9},
	{Temperature: 1, TopP: 0.8},
	{Temperature: 1.3, MinP: 0.1},
	{Temperature: 0.9, TopK: 12, TopP: 0.95, MinP: 0.05, RepetitionPenalty: 1.2, FrequencyPenalty: 0.4, Logprobs: 20},
	{Temperature: 1.5, TopP: 0.6, RepetitionPenalty: 0.8, PresencePenalty: -0.5},
}

// sampleExact reports whether r's token is the penalised argmax whatever
// the draw: those rows must agree with the reference every time.
func sampleExact(r backend.SampleRow) bool { return !(r.Temperature >= 1e-5) || r.TopK == 1 }

// runSampleRows compares a RowSampler's tokens and logprobs with
// backend.HostSample (internal/sample) on the same rows, seeds and
// counters, over odd and vocabulary-long rows, rows of tied logits (bf16
// logits tie often; ranks break ties by id), masked tokens and a NaN row.
// Greedy and top-k 1 rows must match exactly; sampled rows may differ only
// where float rounding moves a boundary under the draw, which the random
// rows here make rare: at most 1% of the draws.
func runSampleRows(e *env) {
	rs, ok := e.test.(backend.RowSampler)
	if !ok {
		e.t.Skipf("%s samples on the host", e.test.Name())
	}
	for _, c := range []struct{ rows, vocab, draws int }{{7, 3001, 40}, {11, 50, 60}, {5, 151936, 4}, {3, 1, 3}} {
		e.simpleStep(c.rows)
		data := e.randn(c.rows*c.vocab, 2.5)
		if c.rows > 3 && c.vocab > 1 {
			row := data[2*c.vocab : 3*c.vocab] // bf16-like: many ties
			for i := range row {
				row[i] = float32(math.Round(float64(row[i])*4) / 4)
			}
			row = data[3*c.vocab : 4*c.vocab] // most tokens masked
			for i := range row {
				if i%3 != 0 {
					row[i] = float32(math.Inf(-1))
				}
			}
			data[4*c.vocab+c.vocab/2] = float32(math.NaN()) // a broken row
		}
		x := e.input(c.rows, c.vocab, data)
		rows := make([]backend.SampleRow, c.rows)
		for i := range rows {
			rows[i] = sampleCases[(i+c.vocab)%len(sampleCases)]
			rows[i].Seed = e.rng.Uint64()
			rows[i].History = sampleHistory(e, c.vocab)
		}
		exact, loose, missed := 0, 0, 0
		for d := range c.draws {
			for i := range rows {
				rows[i].Counter = uint64(d)*7919 + uint64(i)
			}
			got, err := rs.SampleRows(x.a, rows)
			if err != nil {
				e.fatalf("%s: SampleRows: %v", e.test.Name(), err)
			}
			if len(got) != len(rows) {
				e.fatalf("%s: SampleRows returned %d results for %d rows", e.test.Name(), len(got), len(rows))
			}
			for i, r := range rows {
				want := backend.HostSample(data[i*c.vocab:(i+1)*c.vocab], r)
				if sampleExact(r) || want.ID == backend.NonFiniteRow {
					exact++
					if got[i].ID != want.ID {
						e.t.Errorf("%d x %d, row %d %+v, draw %d: token %d, reference %d", c.rows, c.vocab, i, r, d, got[i].ID, want.ID)
					}
				} else {
					loose++
					if got[i].ID != want.ID {
						missed++
						continue
					}
				}
				sameLogprobs(e, got[i], want, i, d)
			}
		}
		if missed > loose/100 {
			e.t.Errorf("%d x %d: %d of %d sampled draws differ from the reference (at most 1%% may, at a rounding boundary)", c.rows, c.vocab, missed, loose)
		}
		e.t.Logf("%d x %d: %d exact draws, %d sampled draws (%d differ)", c.rows, c.vocab, exact, loose, missed)
		after := make([]float32, len(data))
		e.test.ReadRows(x.a, after)
		for i := range data {
			if math.Float32bits(after[i]) != math.Float32bits(data[i]) && !(data[i] != data[i] && after[i] != after[i]) {
				e.fatalf("%s: SampleRows changed logit %d: %v -> %v", e.test.Name(), i, data[i], after[i])
			}
		}
	}
}

// sampleHistory is a random token history: distinct ids, some only in the
// prompt (count 0), a few beyond the vocabulary (ignored).
func sampleHistory(e *env, vocab int) []backend.TokenCount {
	n := e.rng.Intn(min(vocab, 300) + 1)
	seen := map[int32]bool{}
	var h []backend.TokenCount
	for range n {
		id := int32(e.rng.Intn(vocab + vocab/50 + 1))
		if seen[id] {
			continue
		}
		seen[id] = true
		h = append(h, backend.TokenCount{ID: id, Output: int32(max(0, e.rng.Intn(5)-1))})
	}
	return h
}

// sameLogprobs compares the raw logprobs of one row (the chosen token's
// and the top list: the same ids in the same order, values within 1e-4).
func sameLogprobs(e *env, got, want backend.Sampled, row, draw int) {
	e.t.Helper()
	close := func(a, b float32) bool {
		if math.IsInf(float64(b), -1) {
			return math.IsInf(float64(a), -1)
		}
		return math.Abs(float64(a-b)) <= 1e-4*max(1, math.Abs(float64(b)))
	}
	if !close(got.Logprob, want.Logprob) {
		e.t.Errorf("row %d draw %d: logprob of token %d %v, reference %v", row, draw, got.ID, got.Logprob, want.Logprob)
	}
	if len(got.Top) != len(want.Top) {
		e.t.Errorf("row %d draw %d: %d top logprobs, reference %d", row, draw, len(got.Top), len(want.Top))
		return
	}
	for j := range want.Top {
		if got.Top[j].ID != want.Top[j].ID || !close(got.Top[j].Logprob, want.Top[j].Logprob) {
			e.t.Errorf("row %d draw %d: top %d is %+v, reference %+v", row, draw, j, got.Top[j], want.Top[j])
		}
	}
}
