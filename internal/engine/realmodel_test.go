package engine_test

import (
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu" // also registers "cpu"
	"github.com/mlxcel/mlxcel/internal/defaultmodel"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// loadStories loads the embedded stories260k model on the CPU backend.
func loadStories(t *testing.T) *model.Model {
	t.Helper()
	dir, err := defaultmodel.Dir()
	if err != nil {
		t.Fatalf("default model: %v", err)
	}
	be, err := backend.New("cpu", backend.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// generate runs reqs on e (enginetest.Generate).
var generate = enginetest.Generate

// loadFixtureRef loads a ../shared/testdata fixture on the CPU backend
// with its reference file ref (transformers' prompt and greedy ids).
func loadFixtureRef(t *testing.T, fixture, ref string) (*model.Model, *modeltest.Reference) {
	t.Helper()
	dir := "../../../shared/testdata/" + fixture
	r, err := modeltest.LoadReferenceFile(dir + "/" + ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, cpu.New(2), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m, r
}

// TestRealModelBatchInvariance runs the real Llama model on the CPU
// backend: each request's greedy tokens and logprobs must be bit-identical
// whether it runs alone or batched with others, chunked and preempted.
func TestRealModelBatchInvariance(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a model")
	}
	m := loadStories(t)
	var reqs []engine.Request
	for i := range 10 {
		p := []int32{1} // BOS
		for j := range 3 + i*17 {
			p = append(p, int32(3+(i*53+j*29)%500))
		}
		reqs = append(reqs, engine.Request{Prompt: p, MaxTokens: 40 + i*5, IgnoreEOS: true})
	}

	alone, err := engine.New(m, engine.Config{Parallel: 1, PrefillChunk: 512})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]enginetest.Output, len(reqs))
	for i, r := range reqs {
		want[i] = generate(t, alone, []engine.Request{r})[0]
	}
	alone.Stop()

	// Small chunks mix prefill and decode rows; a small cache forces
	// preemption and recompute.
	batched, err := engine.New(m, engine.Config{Parallel: 6, PrefillChunk: 24, BlockSize: 16, NumBlocks: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer batched.Stop()
	got := generate(t, batched, reqs)
	for i := range reqs {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) {
			t.Errorf("request %d: batched %v\nalone   %v", i, got[i].Tokens, want[i].Tokens)
			continue
		}
		if !slices.Equal(got[i].Logprobs, want[i].Logprobs) {
			t.Errorf("request %d: logprobs differ batched vs alone", i)
		}
		if got[i].Reason != engine.FinishLength {
			t.Errorf("request %d: finish %q", i, got[i].Reason)
		}
	}
	st := batched.Stats()
	if st.Preemptions == 0 {
		t.Error("the small cache should have forced a preemption")
	}
	t.Logf("steps %d, prefill %d, decode %d, preemptions %d", st.Steps, st.PrefillTokens, st.DecodeTokens, st.Preemptions)
}

// logitsOnly hides the model's argmax path, forcing the sampler path.
type logitsOnly struct{ engine.Model }

// TestGreedyArgmaxPathMatchesSampler: pure-greedy steps use the model's
// ForwardArgmax (ids only, no logits copied back); they must produce the
// same tokens as sampling the logits at temperature 0.
func TestGreedyArgmaxPathMatchesSampler(t *testing.T) {
	m := loadStories(t)
	var reqs []engine.Request
	for i := range 4 {
		reqs = append(reqs, engine.Request{Prompt: []int32{1, int32(100 + 40*i), int32(7 + i)}, MaxTokens: 40, IgnoreEOS: true})
	}
	run := func(mm engine.Model) []enginetest.Output {
		e, err := engine.New(mm, engine.Config{Parallel: 4, MaxQueue: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		return generate(t, e, reqs)
	}
	fast, slow := run(m), run(logitsOnly{m})
	for i := range reqs {
		if !slices.Equal(fast[i].Tokens, slow[i].Tokens) || len(fast[i].Tokens) != 40 {
			t.Errorf("request %d: argmax path %v, sampler path %v", i, fast[i].Tokens, slow[i].Tokens)
		}
	}
}

// A greedy request that wants its tokens' logprobs (OpenAI's logprobs:
// true with top_logprobs: 0) must get real values, not the argmax path's.
func TestGreedyWithLogprobGetsRealLogprobs(t *testing.T) {
	m := loadStories(t)
	e, err := engine.New(m, engine.Config{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	res := generate(t, e, []engine.Request{{Prompt: []int32{1}, MaxTokens: 8, IgnoreEOS: true, NeedLogprob: true}})
	for i, lp := range res[0].Logprobs {
		if !(lp < 0) {
			t.Fatalf("token %d: logprob %v", i, lp)
		}
	}
}
