package engine_test

import (
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// TestGptOssEngine runs the gpt-oss fixtures (alternating sliding layers of
// window 8 with attention sinks, MXFP4 experts) through the engine: the
// reference prompt decoded greedily gives transformers' greedy ids, and
// requests batched with rings, prefill chunks longer than the window and
// preemption equal each request run alone.
func TestGptOssEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a model")
	}
	for _, dir := range []string{"../../../shared/testdata/tiny/gpt_oss-mxfp4", "../../../shared/testdata/tiny/gpt_oss-mlx-mxfp4-q8g64"} {
		t.Run(dir[len("../../../shared/testdata/tiny/"):], func(t *testing.T) {
			ref, err := modeltest.LoadReference(dir)
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(dir, cpu.New(2), model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			e, err := engine.New(m, engine.Config{Parallel: 4, PrefillChunk: 12, BlockSize: 16, NumBlocks: 8})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Stop()
			if r := e.KVStore().Spec().RingTokens; r == 0 {
				t.Fatal("the batched engine keeps the sliding layers paged; the test wants rings")
			}
			got := generate(t, e, []engine.Request{{Prompt: ref.InputIDs, MaxTokens: len(ref.GreedyIDs), IgnoreEOS: true}})[0]
			// The fixtures' smallest greedy margin is 0.0067: no near-ties.
			if !slices.Equal(got.Tokens, ref.GreedyIDs) {
				t.Fatalf("greedy through the engine %v\nreference %v", got.Tokens, ref.GreedyIDs)
			}
			var reqs []engine.Request
			for i := range 8 {
				p := []int32{1}
				for j := range 3 + i*7 {
					p = append(p, int32(3+(i*53+j*29)%500))
				}
				r := engine.Request{Prompt: p, MaxTokens: 30 + i*3, IgnoreEOS: true}
				if i%2 == 1 {
					seed := uint64(i)
					r.Params = sample.Params{Temperature: 0.8, TopP: 1, RepetitionPenalty: 1, Seed: &seed}
				}
				reqs = append(reqs, r)
			}
			alone, err := engine.New(m, engine.Config{Parallel: 1, PrefillChunk: 512, MaxContext: 256})
			if err != nil {
				t.Fatal(err)
			}
			var want [][]int32
			for _, r := range reqs {
				want = append(want, generate(t, alone, []engine.Request{r})[0].Tokens)
			}
			alone.Stop()
			batched := generate(t, e, reqs)
			for i := range reqs {
				if !slices.Equal(batched[i].Tokens, want[i]) {
					t.Errorf("request %d: batched %v\nalone   %v", i, batched[i].Tokens, want[i])
				}
			}
			if e.Stats().Preemptions == 0 {
				t.Error("the small cache should have forced a preemption")
			}
		})
	}
}
