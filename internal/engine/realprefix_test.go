package engine_test

import (
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// TestRealModelPrefixCache runs stories260k on the CPU backend with
// requests sharing a 100-token prefix: greedy tokens and their logprobs
// must be bit-identical with prefix caching on and off, whether the
// requests run one after another (each maps the blocks the previous ones
// left) or together on a cache small enough to preempt.
func TestRealModelPrefixCache(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a model")
	}
	m := loadStories(t)
	prefix := []int32{1} // BOS
	for j := range 99 {
		prefix = append(prefix, int32(3+(j*41)%480))
	}
	var reqs []engine.Request
	for i := range 8 {
		p := slices.Clone(prefix[:100-(i%3)*9]) // 100, 91 and 82 shared tokens
		for j := range 2 + i*5 {
			p = append(p, int32(5+(i*67+j*13)%470))
		}
		// Most ask for logprobs (the sampler path); two stay on the
		// argmax path.
		r := engine.Request{Prompt: p, MaxTokens: 24 + i*3, IgnoreEOS: true}
		if i%4 != 3 {
			r.NeedLogprob, r.Params = true, sample.Params{Logprobs: i % 2}
		}
		reqs = append(reqs, r)
	}

	run := func(cfg engine.Config, sequential bool) ([]enginetest.Output, engine.Stats) {
		e, err := engine.New(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		if !sequential {
			return generate(t, e, reqs), e.Stats()
		}
		var res []enginetest.Output
		for _, r := range reqs {
			res = append(res, generate(t, e, []engine.Request{r})[0])
		}
		return res, e.Stats()
	}
	base := engine.Config{Parallel: 4, PrefillChunk: 48, BlockSize: 16}
	off := base
	off.DisablePrefixCache = true
	want, _ := run(off, true)

	small := base
	small.NumBlocks = 24 // 384 tokens for 4 sequences of up to ~160: preempts
	for _, tc := range []struct {
		name       string
		cfg        engine.Config
		sequential bool
	}{
		{"sequential", base, true},
		{"concurrent", base, false},
		{"concurrent-preempting", small, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := run(tc.cfg, tc.sequential)
			for i := range reqs {
				if !slices.Equal(got[i].Tokens, want[i].Tokens) {
					t.Errorf("request %d: prefix cache %v\nwithout     %v", i, got[i].Tokens, want[i].Tokens)
					continue
				}
				// A pure greedy request's logprob is whatever path its
				// step took (0 from the argmax path, real when batched
				// with sampling requests): only compared when asked for.
				if reqs[i].NeedLogprob && !slices.Equal(got[i].Logprobs, want[i].Logprobs) {
					t.Errorf("request %d: logprobs differ with the prefix cache:\n%v\n%v", i, got[i].Logprobs, want[i].Logprobs)
				}
				if reqs[i].NeedLogprob && !(got[i].Logprobs[0] < 0) {
					t.Errorf("request %d: logprob %v is not real", i, got[i].Logprobs[0])
				}
			}
			if st.PrefixCacheHits == 0 {
				t.Error("no prefix cache hits")
			}
			if tc.cfg.NumBlocks > 0 && st.Preemptions == 0 {
				t.Error("the small cache should have forced preemptions")
			}
			t.Logf("hits %d of %d tokens, prefill %d, preemptions %d", st.PrefixCacheHits, st.PrefixCacheQueries, st.PrefillTokens, st.Preemptions)
		})
	}
}
