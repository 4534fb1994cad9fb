//go:build linux

package cuda

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// devRows puts rows x cols of data on the device. NewTensor's zero fill is
// queued on the stream and htod is not: the fill must finish first, or it
// overwrites the copy.
func devRows(t *testing.T, b *Backend, rows, cols int, data []float32) backend.Tensor {
	t.Helper()
	x := b.NewTensor(rows, cols)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	unbind := b.bind()
	err := b.htod(b.tt(x).ptr, unsafe.Pointer(&data[0]), 4*len(data))
	unbind()
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// gpuSampleCases mixes every knob over 64 rows of a real vocabulary.
func gpuSampleRows(r *rand.Rand, n, vocab int) []backend.SampleRow {
	base := []backend.SampleRow{
		{Temperature: 0},
		{Temperature: 0, RepetitionPenalty: 1.1, FrequencyPenalty: 0.5, Logprobs: 5},
		{Temperature: 0.7, TopK: 1, PresencePenalty: 1},
		{Temperature: 1},
		{Temperature: 0.7, TopK: 50},
		{Temperature: 1, TopP: 0.9},
		{Temperature: 0.6, TopP: 0.95, Logprobs: 20},
		{Temperature: 0.8, MinP: 0.05},
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05},
		{Temperature: 0.7, TopP: 0.9, RepetitionPenalty: 1.1, PresencePenalty: 0.5, FrequencyPenalty: 0.5, Logprobs: 1},
		{Temperature: 1, TopK: 5000, TopP: 0.5},
	}
	rows := make([]backend.SampleRow, n)
	for i := range rows {
		rows[i] = base[i%len(base)]
		rows[i].Seed = r.Uint64()
		seen := map[int32]bool{}
		for range r.IntN(3000) {
			id := int32(r.IntN(vocab))
			if !seen[id] {
				seen[id] = true
				rows[i].History = append(rows[i].History, backend.TokenCount{ID: id, Output: int32(max(0, r.IntN(4)-1))})
			}
		}
	}
	return rows
}

// lmLogits imitates a model's next-token logits: a broad background, a
// few strong candidates, and bf16 rounding (ties).
func lmLogits(r *rand.Rand, n int) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 2)
	}
	for j := range 20 {
		l[r.IntN(n)] = 14 - float32(j)*0.5
	}
	for i := range l {
		l[i] = math.Float32frombits(math.Float32bits(l[i]) &^ 0xffff) // bf16
	}
	return l
}

// TestSampleRowsGPU compares the device's tokens and logprobs with
// backend.HostSample over 64 rows of a 128k vocabulary and 16 draws each:
// greedy and top-k 1 rows exactly, sampled rows but for <= 0.5% of the
// draws (rounding at a boundary), and logs the time of a 64-row call.
func TestSampleRowsGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	r := rand.New(rand.NewPCG(21, 22))
	for _, vocab := range []int{128256, 151936, 1001} {
		const n = 64
		data := make([]float32, 0, n*vocab)
		for range n {
			data = append(data, lmLogits(r, vocab)...)
		}
		x := devRows(t, b, n, vocab, data)
		rows := gpuSampleRows(r, n, vocab)
		loose, missed := 0, 0
		var took time.Duration
		for d := range 16 {
			for i := range rows {
				rows[i].Counter = uint64(d)
			}
			start := time.Now()
			got, err := b.SampleRows(x, rows)
			if d > 0 {
				took += time.Since(start)
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, row := range rows {
				want := backend.HostSample(data[i*vocab:(i+1)*vocab], row)
				if !(row.Temperature >= 1e-5) || row.TopK == 1 {
					if got[i].ID != want.ID {
						t.Errorf("vocab %d row %d %+v draw %d: token %d, host %d", vocab, i, row.Temperature, d, got[i].ID, want.ID)
					}
				} else if loose++; got[i].ID != want.ID {
					missed++
					continue
				}
				if math.Abs(float64(got[i].Logprob-want.Logprob)) > 1e-4 || len(got[i].Top) != len(want.Top) {
					t.Errorf("vocab %d row %d: logprob %v (%d top), host %v (%d top)", vocab, i, got[i].Logprob, len(got[i].Top), want.Logprob, len(want.Top))
					continue
				}
				for j := range want.Top {
					if got[i].Top[j].ID != want.Top[j].ID || math.Abs(float64(got[i].Top[j].Logprob-want.Top[j].Logprob)) > 1e-4 {
						t.Errorf("vocab %d row %d top %d: %+v, host %+v", vocab, i, j, got[i].Top[j], want.Top[j])
					}
				}
			}
		}
		if missed*200 > loose {
			t.Errorf("vocab %d: %d of %d sampled draws differ from the host", vocab, missed, loose)
		}
		t.Logf("vocab %d: %d sampled draws, %d differ; %v per 64-row call", vocab, loose, missed, took/15)
	}
}

// TestSampleBatchInvariantGPU: a row's token depends on its own logits,
// knobs, seed and counter only: alone, or as row 37 of 50 beside other
// rows, it samples the same.
func TestSampleBatchInvariantGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	r := rand.New(rand.NewPCG(31, 32))
	const vocab, n, at = 128256, 50, 37
	data := make([]float32, 0, n*vocab)
	for range n {
		data = append(data, lmLogits(r, vocab)...)
	}
	all := devRows(t, b, n, vocab, data)
	one := devRows(t, b, 1, vocab, data[at*vocab:(at+1)*vocab])
	rows := gpuSampleRows(r, n, vocab)
	for k, p := range []backend.SampleRow{{Temperature: 1, TopP: 0.9}, {Temperature: 0.8, TopK: 40, MinP: 0.05, RepetitionPenalty: 1.2}} {
		p.Seed = 77
		p.History = rows[0].History
		for d := range 50 {
			p.Counter = uint64(d)
			rows[at] = p
			many, err := b.SampleRows(all, rows)
			if err != nil {
				t.Fatal(err)
			}
			alone, err := b.SampleRows(one, []backend.SampleRow{p})
			if err != nil {
				t.Fatal(err)
			}
			if many[at].ID != alone[0].ID {
				t.Fatalf("case %d draw %d: token %d in the batch, %d alone", k, d, many[at].ID, alone[0].ID)
			}
		}
	}
}
