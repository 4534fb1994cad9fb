//go:build linux

package cuda

import (
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
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
			prompt = append(prompt, int32(2+(i*41+j*13)%(m.Vocab()-2)))
		}
		reqs = append(reqs, engine.Request{Prompt: prompt, MaxTokens: 40, IgnoreEOS: true, Params: p, NeedLogprob: true})
	}
	run := func(mm engine.Model) []enginetest.Output {
		e, err := engine.New(mm, engine.Config{Parallel: 16, MaxContext: 256})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		return enginetest.Generate(t, e, reqs)
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
