package sample

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchLogits imitates a language model's next-token logits: a broad
// normal background and a handful of strong candidates on top, so top-p 0.9
// keeps a realistic few tokens. flat leaves out the strong candidates, the
// hard case for top-p (the nucleus spans a large part of the vocabulary).
func benchLogits(n int, flat bool) []float32 {
	r := rand.New(rand.NewPCG(uint64(n), 99))
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 2)
	}
	if !flat {
		for j := range 20 {
			l[r.IntN(n)] = 16 - float32(j)*0.6
		}
	}
	return l
}

// Run with: go test ./internal/sample -run '^$' -bench Sample -benchmem
func BenchmarkSample(b *testing.B) {
	prompt := make([]int32, 2000)
	gen := make([]int32, 200)
	for _, vocab := range []int{128256, 262144} {
		for i := range prompt {
			prompt[i] = int32(i * 7919 % vocab)
		}
		for i := range gen {
			gen[i] = int32(i * 104729 % vocab)
		}
		cases := []struct {
			name   string
			p      Params
			flat   bool
			penal  bool
			withLP bool
		}{
			{name: "greedy", p: Params{Temperature: 0}},
			{name: "greedy+logprobs5", p: Params{Temperature: 0, Logprobs: 5}},
			{name: "T1", p: Params{Temperature: 1}},
			{name: "topp0.9", p: Params{Temperature: 1, TopP: 0.9}},
			{name: "topp0.9_T0.7", p: Params{Temperature: 0.7, TopP: 0.9}},
			{name: "topp0.9_flat", p: Params{Temperature: 1, TopP: 0.9}, flat: true},
			{name: "topk50", p: Params{Temperature: 0.7, TopK: 50}},
			{name: "minp0.05", p: Params{Temperature: 0.7, MinP: 0.05}},
			{name: "topk40_topp0.95_minp0.05", p: Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05}},
			{name: "penalties_topp0.9", p: Params{Temperature: 0.7, TopP: 0.9, RepetitionPenalty: 1.1, PresencePenalty: 0.5, FrequencyPenalty: 0.5}, penal: true},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("vocab=%d/%s", vocab, c.name), func(b *testing.B) {
				l := benchLogits(vocab, c.flat)
				c.p.Seed = seed(1)
				s := New(c.p, vocab)
				var pr, ge []int32
				if c.penal {
					pr, ge = prompt, gen
				}
				b.ReportAllocs()
				for b.Loop() {
					s.Sample(l, pr, ge)
				}
			})
		}
	}
}

func BenchmarkGreedyArgmax(b *testing.B) {
	for _, vocab := range []int{128256, 262144} {
		b.Run(fmt.Sprintf("vocab=%d", vocab), func(b *testing.B) {
			l := benchLogits(vocab, false)
			for b.Loop() {
				Greedy(l)
			}
		})
	}
}

// BenchmarkSampleWith is SampleWith's cost beside Sample's: the survivors
// are put in id order for the draw (a sort of the nucleus, large when the
// distribution is flat).
func BenchmarkSampleWith(b *testing.B) {
	const vocab = 128256
	for _, c := range []struct {
		name string
		p    Params
		flat bool
	}{
		{"topp0.9", Params{Temperature: 1, TopP: 0.9}, false},
		{"topp0.9_flat", Params{Temperature: 1, TopP: 0.9}, true},
		{"topk50", Params{Temperature: 0.7, TopK: 50}, false},
		{"T1", Params{Temperature: 1}, false},
	} {
		l := benchLogits(vocab, c.flat)
		s := New(c.p, vocab)
		b.Run(c.name+"/Sample", func(b *testing.B) {
			for b.Loop() {
				s.Sample(l, nil, nil)
			}
		})
		b.Run(c.name+"/SampleWith", func(b *testing.B) {
			i := uint64(0)
			for b.Loop() {
				i++
				s.SampleWith(l, nil, nil, Uniform(1, i))
			}
		})
	}
}
