package engine_test

import (
	"math"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// TestPrefixCacheSlotSnapshots: prefix caching on models whose cache is
// more than blocks (Qwen3.5's recurrent layers, Gemma 4's and gpt-oss's
// sliding-window rings). A prompt run twice must find its prefix the
// second time, up to the last block boundary before its last token (the
// snapshot its first run left there), and both runs must continue with
// transformers' greedy ids. A follow-up turn (the prompt, part of the
// answer, new tokens) must hit that prefix and give the tokens of an
// engine without prefix caching, and its logprobs bit for bit (to 1e-4
// with recurrent layers: their chunked delta rule rounds by how a prompt
// is chunked).
func TestPrefixCacheSlotSnapshots(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a model")
	}
	for _, c := range []struct{ dir, ref string }{
		{"tiny/qwen3_5_text-bf16", "reference_t130.safetensors"},
		{"tiny/qwen3_5_moe_text-mlx-q4g64", "reference.safetensors"},
		{"tiny/gemma4-bf16", "reference.safetensors"},
		{"tiny/gpt_oss-bf16", "reference.safetensors"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			m, ref := loadFixtureRef(t, c.dir, c.ref)
			// Four slots and room for many blocks: windowed layers go to
			// rings (their ring is shorter than the pages).
			cfg := engine.Config{Parallel: 4, PrefillChunk: 12, BlockSize: 16, NumBlocks: 64}
			e, err := engine.New(m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Stop()
			spec := e.KVStore().Spec()
			if !e.PrefixCaching() || spec.Snapshots != cfg.Parallel {
				t.Fatalf("prefix caching %v, %d snapshot places: want on, one per slot", e.PrefixCaching(), spec.Snapshots)
			}
			const bs = 16
			boundary := (len(ref.InputIDs) - 1) / bs * bs
			first := engine.Request{Prompt: ref.InputIDs, MaxTokens: len(ref.GreedyIDs), IgnoreEOS: true}
			for run := range 2 {
				got := generate(t, e, []engine.Request{first})[0].Tokens
				if !slices.Equal(got, ref.GreedyIDs) {
					t.Fatalf("run %d: %v\nreference greedy ids %v", run, got, ref.GreedyIDs)
				}
				if st := e.Stats(); st.PrefixCacheHits != uint64(run*boundary) || st.SnapshotsSaved != 1 || st.SnapshotFailures != 0 {
					t.Fatalf("after run %d: %d prefix-cache hit tokens, want %d; %d snapshots saved (want 1), %d refused",
						run, st.PrefixCacheHits, run*boundary, st.SnapshotsSaved, st.SnapshotFailures)
				}
			}

			follow := slices.Concat(ref.InputIDs, ref.GreedyIDs[:8], []int32{5, 7, 11, 13, 17, 19, 23})
			turn := engine.Request{Prompt: follow, MaxTokens: 12, IgnoreEOS: true, Params: sample.Params{Logprobs: 1}}
			before := e.Stats().PrefixCacheHits
			got := generate(t, e, []engine.Request{turn})[0]
			if hit := e.Stats().PrefixCacheHits - before; hit != uint64(boundary) {
				t.Errorf("follow-up turn: %d tokens from the cache, want %d (the first prompt's snapshot)", hit, boundary)
			}
			off := cfg
			off.DisablePrefixCache = true
			plain, err := engine.New(m, off)
			if err != nil {
				t.Fatal(err)
			}
			want := generate(t, plain, []engine.Request{turn})[0]
			plain.Stop()
			tol := 0.0
			if slices.ContainsFunc(spec.Layers, backend.KVLayer.Recurrent) {
				tol = 1e-4
			}
			close := len(got.Logprobs) == len(want.Logprobs)
			for i := range got.Logprobs {
				close = close && math.Abs(float64(got.Logprobs[i]-want.Logprobs[i])) <= tol
			}
			if !slices.Equal(got.Tokens, want.Tokens) || !close {
				t.Errorf("follow-up turn from the cache %v %v\nwithout prefix caching %v %v", got.Tokens, got.Logprobs, want.Tokens, want.Logprobs)
			}

			// Prompts that share only their first 35 tokens (a system
			// prompt): the first of them finds the first prompt's blocks
			// up to 32 with no snapshot there (unless that prompt ended
			// there), so it leaves one at that branch point, and the next
			// one hits it.
			sys := ref.InputIDs[:2*bs+3]
			shared := func(tail ...int32) engine.Request {
				if tail[0] == ref.InputIDs[len(sys)] {
					t.Fatalf("tail %v continues the reference prompt", tail)
				}
				return engine.Request{Prompt: slices.Concat(sys, tail), MaxTokens: 6, IgnoreEOS: true, Params: sample.Params{Logprobs: 1}}
			}
			// Tails long enough that each prompt's own last boundary (48)
			// is past the branch point.
			generate(t, e, []engine.Request{shared(29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)})
			third := shared(2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53)
			before = e.Stats().PrefixCacheHits
			got = generate(t, e, []engine.Request{third})[0]
			if hit := e.Stats().PrefixCacheHits - before; hit != uint64(2*bs) {
				t.Errorf("prompts sharing a system prompt: %d tokens from the cache, want %d (the branch point's snapshot)", hit, 2*bs)
			}
			plain, err = engine.New(m, off)
			if err != nil {
				t.Fatal(err)
			}
			want = generate(t, plain, []engine.Request{third})[0]
			plain.Stop()
			close = len(got.Logprobs) == len(want.Logprobs)
			for i := range got.Logprobs {
				close = close && math.Abs(float64(got.Logprobs[i]-want.Logprobs[i])) <= tol
			}
			if !slices.Equal(got.Tokens, want.Tokens) || !close {
				t.Errorf("shared system prompt from the cache %v %v\nwithout prefix caching %v %v", got.Tokens, got.Logprobs, want.Tokens, want.Logprobs)
			}
		})
	}
}
