package backendtest

import (
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
)

func init() {
	register("SampleRowsMasked", runSampleRowsMasked)
}

// sampleMasks are the constraint masks of SampleRowsMasked, by row: none
// (unmasked beside masked rows), one token, a random third, one 64-bit
// word, a mask shorter than the row (ids past it are refused), all
// tokens, and a random half.
func sampleMasks(e *env, rows, vocab int) [][]uint64 {
	words := (vocab + 63) / 64
	bits := func(keep func(id int) bool) []uint64 {
		m := make([]uint64, words)
		for id := range vocab {
			if keep(id) {
				m[id/64] |= 1 << (id % 64)
			}
		}
		return m
	}
	out := make([][]uint64, rows)
	for i := range out {
		switch i % 7 {
		case 0:
		case 1:
			one := e.rng.Intn(vocab)
			out[i] = bits(func(id int) bool { return id == one })
		case 2:
			out[i] = bits(func(int) bool { return e.rng.Intn(3) == 0 })
		case 3:
			out[i] = bits(func(id int) bool { return id/64 == min(1, words-1) })
		case 4:
			out[i] = bits(func(int) bool { return e.rng.Intn(2) == 0 })[:max(1, words/2)]
		case 5:
			out[i] = bits(func(int) bool { return true })
		default:
			out[i] = bits(func(int) bool { return e.rng.Intn(2) == 0 })
		}
	}
	return out
}

// runSampleRowsMasked: rows with a constraint's mask (SampleRow.Allowed)
// sample what backend.HostSample samples with the same mask, logprobs
// included (the constrained distribution's), every knob; a masked row
// holding NaN still fails as non-finite; afterwards a masked row's
// refused logits are -Inf and the rest unchanged, other rows untouched.
func runSampleRowsMasked(e *env) {
	rs, ok := e.test.(backend.RowSampler)
	if !ok {
		e.t.Skipf("%s samples on the host", e.test.Name())
	}
	for _, c := range []struct{ rows, vocab, draws int }{{15, 3001, 30}, {8, 128256, 3}, {7, 70, 40}} {
		e.simpleStep(c.rows)
		data := e.randn(c.rows*c.vocab, 2.5)
		const nanRow = 9
		if c.rows > nanRow {
			data[nanRow*c.vocab+c.vocab/3] = float32(math.NaN())
		}
		x := e.input(c.rows, c.vocab, data)
		masks := sampleMasks(e, c.rows, c.vocab)
		rows := make([]backend.SampleRow, c.rows)
		for i := range rows {
			rows[i] = sampleCases[(3*i+c.vocab)%len(sampleCases)]
			rows[i].Seed = e.rng.Uint64()
			rows[i].History = sampleHistory(e, c.vocab)
			rows[i].Allowed = masks[i]
		}
		loose, missed := 0, 0
		for d := range c.draws {
			for i := range rows {
				rows[i].Counter = uint64(d)*31 + uint64(i)
			}
			got, err := rs.SampleRows(x.a, rows)
			if err != nil {
				e.fatalf("%s: SampleRows: %v", e.test.Name(), err)
			}
			for i, r := range rows {
				want := backend.HostSample(data[i*c.vocab:(i+1)*c.vocab], r)
				if want.ID != backend.NonFiniteRow && !allowedID(r.Allowed, want.ID) {
					e.fatalf("reference drew token %d outside row %d's mask", want.ID, i)
				}
				if sampleExact(r) || want.ID == backend.NonFiniteRow {
					if got[i].ID != want.ID {
						e.t.Errorf("%d x %d, masked row %d %+v, draw %d: token %d, reference %d", c.rows, c.vocab, i, r.Temperature, d, got[i].ID, want.ID)
					}
				} else if loose++; got[i].ID != want.ID {
					missed++
					if !allowedID(r.Allowed, got[i].ID) {
						e.t.Errorf("%d x %d, row %d draw %d: token %d is outside the mask", c.rows, c.vocab, i, d, got[i].ID)
					}
					continue
				}
				sameLogprobs(e, got[i], want, i, d)
			}
		}
		if missed > loose/100 {
			e.t.Errorf("%d x %d: %d of %d masked sampled draws differ from the reference (at most 1%% may)", c.rows, c.vocab, missed, loose)
		}
		after := make([]float32, len(data))
		e.test.ReadRows(x.a, after)
		for i := range data {
			row, id := i/c.vocab, i%c.vocab
			want := data[i]
			if row != nanRow && !allowedID(rows[row].Allowed, int32(id)) {
				want = float32(math.Inf(-1))
			}
			if math.Float32bits(after[i]) != math.Float32bits(want) && !(want != want && after[i] != after[i]) {
				e.fatalf("%s: after masked sampling, row %d logit %d is %v, want %v", e.test.Name(), row, id, after[i], want)
			}
		}
	}
}

// allowedID reports whether mask allows id (a nil mask allows every id).
func allowedID(mask []uint64, id int32) bool {
	if mask == nil {
		return true
	}
	w := int(id) / 64
	return id >= 0 && w < len(mask) && mask[w]>>(uint(id)%64)&1 == 1
}
