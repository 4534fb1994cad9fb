package engine_test

import (
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/engine"
)

// TestQwen35HybridBatched runs the Qwen3.5 fixtures (three linear-attention
// layers with per-slot recurrent state, one full-attention layer) through
// the engine: the references' prompts must continue with transformers'
// greedy ids, alone and batched with other requests in prefill chunks of
// 12 (each crossing the conv window and continuing the state of the chunk
// before), through preemptions of a small cache (recompute from position
// 0 in whatever slot comes free) and with pipelined decode steps. The
// other requests must give the same tokens batched as alone, with prefix
// caching (slot snapshots) and without; the reference runs without.
func TestQwen35HybridBatched(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a model")
	}
	for _, c := range []struct{ dir, ref string }{
		// The references whose greedy margins (>= 0.003) leave no near-tie.
		{"tiny/qwen3_5_text-bf16", "reference_t130.safetensors"},
		{"tiny/qwen3_5_moe_text-mlx-q4g64", "reference.safetensors"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			m, ref := loadFixtureRef(t, c.dir, c.ref)
			reqs := []engine.Request{{Prompt: ref.InputIDs, MaxTokens: len(ref.GreedyIDs), IgnoreEOS: true}}
			for i := range 5 {
				var p []int32
				for j := range 5 + i*11 {
					p = append(p, int32(3+(i*53+j*29)%500))
				}
				reqs = append(reqs, engine.Request{Prompt: p, MaxTokens: 20 + i*3, IgnoreEOS: true})
			}

			alone, err := engine.New(m, engine.Config{Parallel: 1, PrefillChunk: 512, MaxContext: 256, DisablePrefixCache: true})
			if err != nil {
				t.Fatal(err)
			}
			if alone.PrefixCaching() {
				t.Error("prefix caching is on though disabled")
			}
			var want [][]int32
			for _, r := range reqs {
				want = append(want, generate(t, alone, []engine.Request{r})[0].Tokens)
			}
			alone.Stop()
			if !slices.Equal(want[0], ref.GreedyIDs) {
				t.Fatalf("alone: %v\nreference greedy ids %v", want[0], ref.GreedyIDs)
			}

			for _, cfg := range []engine.Config{
				{Parallel: 4, PrefillChunk: 12, BlockSize: 16, NumBlocks: 14, DisablePrefixCache: true},
				{Parallel: 4, PrefillChunk: 12, BlockSize: 16, NumBlocks: 14},
				{Parallel: 3, PrefillChunk: 64, RunAhead: engine.RunAheadAlways},
			} {
				e, err := engine.New(m, cfg)
				if err != nil {
					t.Fatal(err)
				}
				got := generate(t, e, reqs)
				st := e.Stats()
				e.Stop()
				for i := range reqs {
					if !slices.Equal(got[i].Tokens, want[i]) {
						t.Errorf("%+v request %d: batched %v\nalone   %v", cfg, i, got[i].Tokens, want[i])
					}
				}
				if cfg.DisablePrefixCache && st.Preemptions == 0 {
					t.Errorf("%+v: the small cache should have forced a preemption", cfg)
				}
				if cfg.RunAhead == engine.RunAheadAlways && st.RunAheadSteps == 0 {
					t.Errorf("%+v: no step ran ahead", cfg)
				}
				t.Logf("%+v: steps %d, prefill %d, decode %d, preemptions %d, run-ahead %d",
					cfg, st.Steps, st.PrefillTokens, st.DecodeTokens, st.Preemptions, st.RunAheadSteps)
			}
		})
	}
}
