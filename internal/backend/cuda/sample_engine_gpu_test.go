//go:build linux

package cuda

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// hostSampling hides the model's ForwardSample and ForwardArgmax: the
// engine then copies logits back and samples on the host.
type hostSampling struct{ engine.Model }

// TestEngineRowSamplingGPU: seeded sampled requests on the tiny 4-bit
// Llama give the same tokens through the device sampler as through the
// host path on the same device logits (both draw sample.Uniform(seed,
// position) by the id-order rule). A request may part where float
// rounding moves a boundary under its draw: at most one of 16, each logged.
func TestEngineRowSamplingGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	m := loadTinyLlamaQ4(t, b)
	compareRowSampling(t, b, m, rowSamplingRequests(m.Vocab()))
}

// TestEngineRowSamplingConstrainedGPU: the same with a constraint on every
// other request (a different pseudo-random eighth of the vocabulary each
// step), so its mask rides with the row to sample_rows; a token outside
// it fails the request's Accept and the test.
func TestEngineRowSamplingConstrainedGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	m := loadTinyLlamaQ4(t, b)
	reqs := rowSamplingRequests(m.Vocab())
	for i := range reqs {
		if i%2 == 0 {
			reqs[i].Constraint = &stepHashConstraint{vocab: m.Vocab(), salt: uint32(i)}
		}
	}
	compareRowSampling(t, b, m, reqs)
}

// stepHashConstraint allows a pseudo-random eighth of the vocabulary, a
// different one each step (the engine calls it from one goroutine at a
// time; compareRowSampling copies it for each run).
type stepHashConstraint struct {
	vocab    int
	salt     uint32
	step     int
	accepted int
}

func (c *stepHashConstraint) allows(id int32) bool {
	return (uint32(id)*2654435761+uint32(c.step)*40503+c.salt*97)>>29 == 0
}

func (c *stepHashConstraint) Mask(allowed []uint64) error {
	clear(allowed)
	for id := range int32(c.vocab) {
		if c.allows(id) {
			allowed[id/64] |= 1 << (id % 64)
		}
	}
	return nil
}

func (c *stepHashConstraint) Accept(id int32) error {
	if !c.allows(id) {
		return fmt.Errorf("token %d is outside step %d's mask", id, c.step)
	}
	c.step++
	c.accepted++
	return nil
}

// rowSamplingRequests are 16 seeded requests over the sampling knobs.
func rowSamplingRequests(vocab int) []engine.Request {
	ps := []sample.Params{
		{Temperature: 1, TopP: 1, RepetitionPenalty: 1},
		{Temperature: 0.8, TopK: 20, TopP: 0.9, RepetitionPenalty: 1, Logprobs: 3},
		{Temperature: 1.2, TopP: 0.7, MinP: 0.05, RepetitionPenalty: 1.3, PresencePenalty: 0.5, FrequencyPenalty: 0.4},
		{Temperature: 0, TopP: 1, RepetitionPenalty: 1.2, Logprobs: 2},
	}
	var reqs []engine.Request
	for i := range 16 {
		p := ps[i%len(ps)]
		seed := uint64(1000 + i)
		p.Seed = &seed
		prompt := []int32{1}
		for j := range 3 + i%7 {
			prompt = append(prompt, int32(2+(i*41+j*13)%(vocab-2)))
		}
		reqs = append(reqs, engine.Request{Prompt: prompt, MaxTokens: 40, IgnoreEOS: true, Params: p, NeedLogprob: true})
	}
	return reqs
}

// compareRowSampling runs reqs through the device sampler and through the
// host path on the same device logits. Each run gets fresh copies of the
// constraints; every constrained request must have accepted all its tokens.
func compareRowSampling(t *testing.T, b *Backend, m *model.Model, reqs []engine.Request) {
	t.Helper()
	run := func(mm engine.Model) []enginetest.Output {
		rs := slices.Clone(reqs)
		var cs []*stepHashConstraint
		for i := range rs {
			if c, ok := rs[i].Constraint.(*stepHashConstraint); ok {
				cp := *c
				rs[i].Constraint = &cp
				cs = append(cs, &cp)
			}
		}
		e, err := engine.New(mm, engine.Config{Parallel: 16, MaxContext: 256})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		out := enginetest.Generate(t, e, rs)
		for i, c := range cs {
			if c.accepted != rs[0].MaxTokens {
				t.Errorf("constraint %d accepted %d tokens, want %d", i, c.accepted, rs[0].MaxTokens)
			}
		}
		return out
	}
	dev, host := run(m), run(hostSampling{m})
	parted := 0
	for i := range reqs {
		if slices.Equal(dev[i].Tokens, host[i].Tokens) {
			continue
		}
		parted++
		j := 0
		for j < len(dev[i].Tokens) && dev[i].Tokens[j] == host[i].Tokens[j] {
			j++
		}
		t.Logf("request %d (%+v) parts at token %d: device %d, host %d", i, reqs[i].Params, j, dev[i].Tokens[j], host[i].Tokens[j])
		if !(reqs[i].Params.Temperature >= 1e-5) {
			t.Errorf("request %d is greedy: the device and the host must agree", i)
		}
	}
	c, r, _, f, lastErr := b.GraphStats()
	t.Logf("graphs: %d captured, %d replays, %d failed (%v)", c, r, f, lastErr)
	if parted > 1 {
		t.Errorf("%d of %d requests part between the device sampler and the host", parted, len(reqs))
	}
}
