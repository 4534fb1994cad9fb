package sample

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestGreedy(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := []struct {
		l    []float32
		want int32
	}{
		{[]float32{1}, 0},
		{[]float32{0.1, 3, -2, 2.9}, 1},
		{[]float32{5, 1, 5, 5}, 0},
		{[]float32{-1, 7, 3, 7}, 1},
		{[]float32{nan, 2, nan, 3}, 3},
		{[]float32{negInf, negInf, -1e30}, 2},
		{[]float32{negInf, nan}, 0},
		{[]float32{1, inf, inf}, 1},
	}
	for _, c := range cases {
		if got := Greedy(c.l); got != c.want {
			t.Errorf("Greedy(%v) = %d, want %d", c.l, got, c.want)
		}
	}
	// Temperature 0 and tiny temperatures are greedy too, through Sample.
	l := testLogits(1000, 5, 3)
	for _, temp := range []float32{0, 1e-6} {
		s := New(Params{Temperature: temp, TopP: 0.5, TopK: 3}, len(l))
		for range 10 {
			if got := s.Sample(l, nil, nil).ID; got != Greedy(l) {
				t.Fatalf("T=%v: got %d, want argmax %d", temp, got, Greedy(l))
			}
		}
	}
}

func TestValidate(t *testing.T) {
	ok := []Params{
		DefaultParams(),
		{Temperature: 0, TopP: 1, RepetitionPenalty: 1},
		{Temperature: 2, TopK: -1, TopP: 0.01, MinP: 1, RepetitionPenalty: 0.01, PresencePenalty: -2, FrequencyPenalty: 2, Logprobs: 20},
		{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0, RepetitionPenalty: 5, PresencePenalty: 2, FrequencyPenalty: -2},
	}
	for _, p := range ok {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: unexpected error %v", p, err)
		}
	}
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	bad := []struct {
		mut   func(*Params)
		param string
	}{
		{func(p *Params) { p.Temperature = -0.1 }, "temperature"},
		{func(p *Params) { p.Temperature = 2.01 }, "temperature"},
		{func(p *Params) { p.Temperature = nan }, "temperature"},
		{func(p *Params) { p.TopK = -2 }, "top_k"},
		{func(p *Params) { p.TopP = 0 }, "top_p"},
		{func(p *Params) { p.TopP = 1.1 }, "top_p"},
		{func(p *Params) { p.TopP = nan }, "top_p"},
		{func(p *Params) { p.MinP = -0.01 }, "min_p"},
		{func(p *Params) { p.MinP = 1.5 }, "min_p"},
		{func(p *Params) { p.RepetitionPenalty = 0 }, "repetition_penalty"},
		{func(p *Params) { p.RepetitionPenalty = -1 }, "repetition_penalty"},
		{func(p *Params) { p.RepetitionPenalty = inf }, "repetition_penalty"},
		{func(p *Params) { p.PresencePenalty = 2.5 }, "presence_penalty"},
		{func(p *Params) { p.PresencePenalty = -2.5 }, "presence_penalty"},
		{func(p *Params) { p.FrequencyPenalty = 3 }, "frequency_penalty"},
		{func(p *Params) { p.FrequencyPenalty = nan }, "frequency_penalty"},
		{func(p *Params) { p.Logprobs = -1 }, "top_logprobs"},
		{func(p *Params) { p.Logprobs = 21 }, "top_logprobs"},
	}
	for _, b := range bad {
		p := DefaultParams()
		b.mut(&p)
		err := p.Validate()
		var pe *ParamError
		if !errors.As(err, &pe) {
			t.Errorf("%+v: got %v, want a *ParamError", p, err)
			continue
		}
		if pe.Param != b.param || !strings.HasPrefix(err.Error(), b.param+" ") {
			t.Errorf("%+v: error %q names %q, want %q", p, err, pe.Param, b.param)
		}
	}
	if err := (Params{}).Validate(); err == nil {
		t.Error("zero Params validated; top_p 0 must be rejected")
	}
}

func TestPenaltiesHandWorked(t *testing.T) {
	logits := []float32{2, -2, 1, 0.5, -1, 3, 0}
	prompt := []int32{0, 1, 0, 6}
	gen := []int32{2, 2, 1, 7, -1} // 7 and -1 are out of range: ignored
	cases := []struct {
		name string
		p    Params
		want []float32
	}{
		// t0: prompt, 2 > 0 -> 2/2 = 1. t1: prompt+gen once: -2*2 = -4,
		// -0.25*1 -> -4.25, -0.5 -> -4.75. t2: gen twice: 1/2 = 0.5,
		// -0.25*2 -> 0, -0.5 -> -0.5. t6: 0 stays 0 (0*2). Others untouched.
		{"all", Params{RepetitionPenalty: 2, FrequencyPenalty: 0.25, PresencePenalty: 0.5},
			[]float32{1, -4.75, -0.5, 0.5, -1, 3, 0}},
		// Repetition only covers prompt tokens too: 2/1.25 = 1.6,
		// -2*1.25 = -2.5, 1/1.25 = 0.8.
		{"repetition", Params{RepetitionPenalty: 1.25},
			[]float32{1.6, -2.5, 0.8, 0.5, -1, 3, 0}},
		// A penalty below 1 rewards: 2/0.5 = 4, -2*0.5 = -1, 1/0.5 = 2.
		{"repetition<1", Params{RepetitionPenalty: 0.5},
			[]float32{4, -1, 2, 0.5, -1, 3, 0}},
		// Frequency/presence touch generated tokens only; negative rewards:
		// t1: -2 + 0.5*1 = -1.5; t2: 1 + 0.5*2 = 2.
		{"frequency<0", Params{FrequencyPenalty: -0.5},
			[]float32{2, -1.5, 2, 0.5, -1, 3, 0}},
		// Presence is per distinct token, not per occurrence.
		{"presence", Params{PresencePenalty: 1.5},
			[]float32{2, -3.5, -0.5, 0.5, -1, 3, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.p, len(logits))
			l := slices.Clone(logits)
			s.applyPenalties(l, prompt, gen)
			if !slices.Equal(l, c.want) {
				t.Errorf("penalised logits %v, want %v", l, c.want)
			}
			for i, v := range s.counts {
				if v != 0 {
					t.Fatalf("counts[%d] = %d after the call, want all zero", i, v)
				}
			}
			// The same numbers through the public path: greedy over the
			// penalised logits, without touching the caller's slice.
			r := s.Sample(logits, prompt, gen)
			if r.ID != Greedy(c.want) {
				t.Errorf("greedy with penalties chose %d, want %d", r.ID, Greedy(c.want))
			}
			if !slices.Equal(logits, []float32{2, -2, 1, 0.5, -1, 3, 0}) {
				t.Fatalf("Sample modified the caller's logits: %v", logits)
			}
		})
	}
	// Penalties can flip the greedy choice.
	l := []float32{3, 2.9, 0}
	if got := New(Params{PresencePenalty: 0.2}, 3).Sample(l, nil, []int32{0}).ID; got != 1 {
		t.Errorf("presence penalty should move greedy from 0 to 1, got %d", got)
	}
}

// logSoftmax64 is the reference for logprobs: float64, max-shifted.
func logSoftmax64(l []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range l {
		m = math.Max(m, float64(v))
	}
	z := 0.0
	for _, v := range l {
		z += math.Exp(float64(v) - m)
	}
	out := make([]float64, len(l))
	for i, v := range l {
		out[i] = float64(v) - m - math.Log(z)
	}
	return out
}

func TestLogprobs(t *testing.T) {
	l := testLogits(3000, 6, 4)
	l[17] = negInf
	l[99] = l[Greedy(l)] // a tie at the top: lower id must come first
	want := logSoftmax64(l)
	order := make([]int32, len(l))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		switch {
		case l[a] > l[b]:
			return -1
		case l[a] < l[b]:
			return 1
		}
		return 0
	})
	prompt, gen := []int32{1, 2, order[0]}, []int32{order[1], order[1], 5}
	for _, p := range []Params{
		{Temperature: 1, Logprobs: 5},             // reuses the sampling sum
		{Temperature: 1, TopP: 0.9, Logprobs: 20}, // ditto, top-p path
		{Temperature: 0.3, TopK: 40, Logprobs: 1}, // separate raw pass
		{Temperature: 0, Logprobs: 7},
		{Temperature: 1.5, MinP: 0.05, RepetitionPenalty: 1.5, PresencePenalty: 2, FrequencyPenalty: 1, Logprobs: 10},
		{Temperature: 0, RepetitionPenalty: 3, Logprobs: 0},
	} {
		p.Seed = seed(3)
		s := New(p, len(l))
		for step := range 50 {
			r := s.Sample(l, prompt, gen)
			if d := math.Abs(float64(r.Logprob) - want[r.ID]); d > 2e-5 {
				t.Fatalf("%+v step %d: logprob of %d = %v, want %v", p, step, r.ID, r.Logprob, want[r.ID])
			}
			if len(r.Top) != p.Logprobs {
				t.Fatalf("%+v: %d top logprobs, want %d", p, len(r.Top), p.Logprobs)
			}
			for i, tl := range r.Top {
				if tl.ID != order[i] {
					t.Fatalf("%+v: top[%d] = %d, want %d", p, i, tl.ID, order[i])
				}
				if d := math.Abs(float64(tl.Logprob) - want[tl.ID]); d > 2e-5 {
					t.Fatalf("%+v: top[%d] logprob %v, want %v", p, i, tl.Logprob, want[tl.ID])
				}
				if i > 0 && tl.Logprob > r.Top[i-1].Logprob {
					t.Fatalf("%+v: top list not descending at %d", p, i)
				}
				if tl.ID == r.ID && tl.Logprob != r.Logprob {
					t.Fatalf("%+v: chosen token's logprob %v differs in the top list (%v)", p, r.Logprob, tl.Logprob)
				}
			}
		}
	}
	// Masked tokens read -Inf, and more alternatives than the vocabulary
	// are capped.
	small := []float32{0, negInf, 1}
	r := New(Params{Logprobs: 20}, 3).Sample(small, nil, nil)
	if len(r.Top) != 3 || r.Top[2].ID != 1 || !math.IsInf(float64(r.Top[2].Logprob), -1) {
		t.Errorf("small vocab top logprobs %+v", r.Top)
	}
	w := logSoftmax64(small)
	if r.ID != 2 || math.Abs(float64(r.Logprob)-w[2]) > 1e-6 {
		t.Errorf("small vocab: %+v, want id 2 logprob %v", r, w[2])
	}
}

func TestSeeds(t *testing.T) {
	l := testLogits(1000, 8, 0.5) // nearly flat: different streams diverge fast
	run := func(p Params) []int32 {
		s := New(p, len(l))
		out := make([]int32, 200)
		gen := make([]int32, 0, 200)
		for i := range out {
			out[i] = s.Sample(l, nil, gen).ID
			gen = append(gen, out[i])
		}
		return out
	}
	for _, base := range []Params{
		{Temperature: 1},
		{Temperature: 0.9, TopP: 0.95, FrequencyPenalty: 0.3},
		{Temperature: 1.1, TopK: 50, MinP: 0.01},
	} {
		a, b := base, base
		a.Seed, b.Seed = seed(1234), seed(1234)
		x, y := run(a), run(b)
		if !slices.Equal(x, y) {
			t.Errorf("%+v: same seed gave different sequences", base)
		}
		b.Seed = seed(1235)
		if slices.Equal(x, run(b)) {
			t.Errorf("%+v: seeds 1234 and 1235 gave the same sequence", base)
		}
		a.Seed, b.Seed = nil, nil
		if slices.Equal(run(a), run(b)) {
			t.Errorf("%+v: two unseeded samplers gave the same sequence", base)
		}
	}
}

func TestDoesNotModifyLogits(t *testing.T) {
	l := testLogits(4096, 9, 2)
	orig := slices.Clone(l)
	for _, p := range []Params{
		{Temperature: 1, RepetitionPenalty: 1.3, PresencePenalty: 1, TopP: 0.9},
		{Temperature: 0.5, TopK: 2000, FrequencyPenalty: 1},
		{Temperature: 1, MinP: 0.1},
		{Temperature: 0, RepetitionPenalty: 2},
	} {
		s := New(p, len(l))
		for range 5 {
			s.Sample(l, []int32{1, 2, 3}, []int32{4, 4, 5})
		}
		if !slices.Equal(l, orig) {
			t.Fatalf("%+v modified the caller's logits", p)
		}
	}
}

func TestLongerLogitsThanVocab(t *testing.T) {
	l := testLogits(300, 10, 1)
	s := New(Params{Temperature: 1, TopP: 0.9, RepetitionPenalty: 1.1, Seed: seed(1)}, 100)
	for range 20 {
		if id := s.Sample(l, []int32{250}, []int32{299}).ID; id < 0 || id >= 300 {
			t.Fatalf("id %d out of range", id)
		}
	}
}

func TestNoAllocsPerToken(t *testing.T) {
	l := testLogits(20000, 11, 2)
	prompt := make([]int32, 500)
	for i := range prompt {
		prompt[i] = int32(i * 37 % len(l))
	}
	gen := []int32{5, 6, 7, 5}
	for _, p := range []Params{
		{Temperature: 0},
		{Temperature: 1},
		{Temperature: 0.7, TopP: 0.9},
		{Temperature: 0.7, TopK: 40},
		{Temperature: 0.7, TopK: 5000, TopP: 0.95},
		{Temperature: 0.7, MinP: 0.05},
		{Temperature: 0.8, TopK: 50, TopP: 0.9, MinP: 0.02, RepetitionPenalty: 1.1, PresencePenalty: 0.5, FrequencyPenalty: 0.5},
	} {
		p.Seed = seed(1)
		s := New(p, len(l))
		s.Sample(l, prompt, gen) // warm-up sizes the candidate buffer
		if a := testing.AllocsPerRun(20, func() { s.Sample(l, prompt, gen) }); a != 0 {
			t.Errorf("%+v: %v allocations per token, want 0", p, a)
		}
	}
}

// TestLogitBias: a bias moves the choice, greedy or sampled, while the
// reported logprobs stay those of the raw logits.
func TestLogitBias(t *testing.T) {
	logits := []float32{3, 1, 0, -1}
	s := New(Params{LogitBias: map[int32]float32{0: -100, 2: 2.5}, Logprobs: 1}, 4)
	r := s.Sample(logits, nil, nil)
	if r.ID != 2 {
		t.Fatalf("greedy with bias chose %d, want 2", r.ID)
	}
	raw := New(Params{Logprobs: 1}, 4).Sample(logits, nil, nil)
	if raw.ID != 0 || r.Top[0].ID != 0 || r.Top[0].Logprob != raw.Logprob {
		t.Errorf("logprobs moved with the bias: %+v vs %+v", r, raw)
	}
	seed := uint64(7)
	hot := New(Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1, Seed: &seed, LogitBias: map[int32]float32{3: 100}}, 4)
	for range 50 {
		if id := hot.Sample(logits, nil, nil).ID; id != 3 {
			t.Fatalf("a +100 bias at temperature 1 still drew %d", id)
		}
	}
	if err := (Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1, LogitBias: map[int32]float32{1: 101}}).Validate(); err == nil {
		t.Error("bias 101 validated")
	} else if pe, ok := err.(*ParamError); !ok || pe.Param != "logit_bias" {
		t.Errorf("error %v does not name logit_bias", err)
	}
}
