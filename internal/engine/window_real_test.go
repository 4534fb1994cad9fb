package engine_test

import (
	"os"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// gemma4Fixture is the tiny Gemma 4 checkpoint: five sliding layers with a
// window of 8 and one full layer.
const gemma4Fixture = "../../../shared/testdata/tiny/gemma4-bf16"

// TestGemma4RingsMatchAlone runs the real Gemma 4 fixture batched, with its
// sliding layers in per-slot rings, prefill chunks longer than the window
// and a cache small enough to preempt; each request's tokens and logprobs
// must be bit-identical to running it alone, where the engine keeps the
// sliding layers paged (a single sequence's ring would be no smaller than
// its pages). Half the requests sample with a seed, so any logit
// difference would change tokens.
func TestGemma4RingsMatchAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a model")
	}
	if _, err := os.Stat(gemma4Fixture); err != nil {
		t.Fatalf("fixture missing (../shared/testdata): %v", err)
	}
	m, err := model.Load(gemma4Fixture, cpu.New(2), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reqs []engine.Request
	for i := range 8 {
		p := []int32{2} // BOS
		for j := range 3 + i*9 {
			p = append(p, int32(3+(i*53+j*29)%500))
		}
		r := engine.Request{Prompt: p, MaxTokens: 30 + i*3, IgnoreEOS: true}
		if i%2 == 1 {
			seed := uint64(i)
			r.Params = sample.Params{Temperature: 0.8, TopP: 1, RepetitionPenalty: 1, Seed: &seed, Logprobs: 1}
		}
		reqs = append(reqs, r)
	}

	alone, err := engine.New(m, engine.Config{Parallel: 1, PrefillChunk: 512, MaxContext: 256})
	if err != nil {
		t.Fatal(err)
	}
	if r := alone.KVStore().Spec().RingTokens; r != 0 {
		t.Fatalf("the single-sequence engine uses rings of %d tokens; the comparison wants it paged", r)
	}
	want := make([]enginetest.Output, len(reqs))
	for i, r := range reqs {
		want[i] = generate(t, alone, []engine.Request{r})[0]
	}
	alone.Stop()

	batched, err := engine.New(m, engine.Config{Parallel: 4, PrefillChunk: 12, BlockSize: 16, NumBlocks: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer batched.Stop()
	if r := batched.KVStore().Spec().RingTokens; r != 8+batched.Config().MaxBatchTokens {
		t.Fatalf("batched engine ring %d tokens, want window 8 + MaxBatchTokens", r)
	}
	got := generate(t, batched, reqs)
	for i := range reqs {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) {
			t.Errorf("request %d: batched %v\nalone   %v", i, got[i].Tokens, want[i].Tokens)
			continue
		}
		// Greedy requests alone take the argmax path, which reports no
		// logprobs; batched with sampled ones they take the logits path.
		if reqs[i].Params.Logprobs > 0 && !slices.Equal(got[i].Logprobs, want[i].Logprobs) {
			t.Errorf("request %d: logprobs differ batched vs alone", i)
		}
	}
	st := batched.Stats()
	if st.Preemptions == 0 {
		t.Error("the small cache should have forced a preemption")
	}
	t.Logf("steps %d, prefill %d, decode %d, preemptions %d", st.Steps, st.PrefillTokens, st.DecodeTokens, st.Preemptions)
}
