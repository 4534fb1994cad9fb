package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// sampledRequests are seeded requests over every knob the backends sample
// with, logprobs included.
func sampledRequests() []engine.Request {
	seed := func(v uint64) *uint64 { return &v }
	ps := []sample.Params{
		{Temperature: 1, TopP: 1, RepetitionPenalty: 1},
		{Temperature: 0.8, TopK: 20, TopP: 0.9, RepetitionPenalty: 1, Logprobs: 3},
		{Temperature: 1.2, TopP: 0.7, MinP: 0.05, RepetitionPenalty: 1.3, PresencePenalty: 0.5, FrequencyPenalty: 0.4},
		{Temperature: 0, TopP: 1, RepetitionPenalty: 1.2, Logprobs: 2},
		{Temperature: 0.7, TopK: 1, TopP: 1, RepetitionPenalty: 1},
	}
	var reqs []engine.Request
	for i, p := range ps {
		p.Seed = seed(uint64(100 + i))
		prompt := []int32{1}
		for j := range 5 + 11*i {
			prompt = append(prompt, int32(3+(i*37+j*13)%400))
		}
		reqs = append(reqs, engine.Request{Prompt: prompt, MaxTokens: 30, IgnoreEOS: true, Params: p, NeedLogprob: true})
	}
	return reqs
}

// TestRowSamplingMatchesHostPath: on the CPU backend, the row sampling
// path (model.ForwardSample, backend.RowSampler) and the host path
// (logits back, the request's own sampler) draw with the same rule and
// the same uniforms, so seeded requests give identical tokens and
// logprobs either way.
func TestRowSamplingMatchesHostPath(t *testing.T) {
	m := loadStories(t)
	reqs := sampledRequests()
	run := func(mm engine.Model) []enginetest.Output {
		e, err := engine.New(mm, engine.Config{Parallel: 4, MaxQueue: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		return generate(t, e, reqs)
	}
	rows, host := run(m), run(logitsOnly{m})
	for i := range reqs {
		if !slices.Equal(rows[i].Tokens, host[i].Tokens) {
			t.Errorf("request %d: row sampling %v\nhost path    %v", i, rows[i].Tokens, host[i].Tokens)
			continue
		}
		if !slices.Equal(rows[i].Logprobs, host[i].Logprobs) {
			t.Errorf("request %d: logprobs differ: %v vs %v", i, rows[i].Logprobs, host[i].Logprobs)
		}
		for j := range rows[i].Top {
			if !slices.Equal(rows[i].Top[j], host[i].Top[j]) {
				t.Errorf("request %d token %d: top %v vs %v", i, j, rows[i].Top[j], host[i].Top[j])
			}
		}
	}
}

// TestRowSamplingBatchInvariance: a seeded sampled request gives the same
// tokens alone and batched with others, chunked and preempted (its draws
// are keyed by its seed and output position only).
func TestRowSamplingBatchInvariance(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a model")
	}
	m := loadStories(t)
	reqs := sampledRequests()
	alone, err := engine.New(m, engine.Config{Parallel: 1, PrefillChunk: 512})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]enginetest.Output, len(reqs))
	for i, r := range reqs {
		want[i] = generate(t, alone, []engine.Request{r})[0]
	}
	alone.Stop()
	batched, err := engine.New(m, engine.Config{Parallel: 5, PrefillChunk: 16, BlockSize: 16, NumBlocks: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer batched.Stop()
	got := generate(t, batched, reqs)
	for i := range reqs {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) {
			t.Errorf("request %d: batched %v\nalone   %v", i, got[i].Tokens, want[i].Tokens)
		}
	}
	t.Logf("preemptions %d", batched.Stats().Preemptions)
}

// hashConstraint allows a pseudo-random seventh-or-so of the vocabulary,
// a different set each step, and records what it accepted.
type hashConstraint struct {
	vocab, step int
	accepted    []int32
}

func (c *hashConstraint) allows(id int32) bool {
	return (uint32(id)*2654435761+uint32(c.step)*40503)>>29 < 1 || id == int32(c.step*13%c.vocab)
}

func (c *hashConstraint) Mask(allowed []uint64) error {
	clear(allowed)
	for id := range int32(c.vocab) {
		if c.allows(id) {
			allowed[id/64] |= 1 << (id % 64)
		}
	}
	return nil
}

func (c *hashConstraint) Accept(id int32) error {
	if !c.allows(id) {
		return fmt.Errorf("token %d not allowed at step %d", id, c.step)
	}
	c.accepted = append(c.accepted, id)
	c.step++
	return nil
}

// rowCounter counts the steps that sampled on the backend with a mask.
type rowCounter struct {
	*model.Model
	masked *int
}

func (m rowCounter) count(rows []backend.SampleRow) {
	for _, r := range rows {
		if r.Allowed != nil {
			*m.masked++
			break
		}
	}
}

func (m rowCounter) ForwardSample(b *backend.Batch, kv backend.KVStore, rows []backend.SampleRow) ([]backend.Sampled, error) {
	m.count(rows)
	return m.Model.ForwardSample(b, kv, rows)
}

func (m rowCounter) ForwardSamplePrepared(b *backend.Batch, kv backend.KVStore, prepare func() ([]backend.SampleRow, error)) ([]backend.Sampled, error) {
	return m.Model.ForwardSamplePrepared(b, kv, func() ([]backend.SampleRow, error) {
		rows, err := prepare()
		m.count(rows)
		return rows, err
	})
}

// TestRowSamplingConstrained: constrained requests sample on the backend
// with their masks (SampleRow.Allowed), and give the tokens and logprobs
// the host path gives (logits back, the mask applied on the host), greedy
// and sampled, beside an unconstrained request.
func TestRowSamplingConstrained(t *testing.T) {
	m := loadStories(t)
	base := sampledRequests()
	run := func(mm engine.Model) ([]enginetest.Output, []*hashConstraint) {
		reqs := slices.Clone(base)
		var cs []*hashConstraint
		for i := range reqs {
			if i == 2 {
				continue // one stays unconstrained
			}
			c := &hashConstraint{vocab: m.Vocab()}
			reqs[i].Constraint = c
			cs = append(cs, c)
		}
		e, err := engine.New(mm, engine.Config{Parallel: 4, MaxQueue: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		return generate(t, e, reqs), cs
	}
	masked := 0
	rows, rc := run(rowCounter{m, &masked})
	host, hc := run(logitsOnly{m})
	if masked == 0 {
		t.Fatal("no step sampled a masked row on the backend")
	}
	for i := range base {
		if !slices.Equal(rows[i].Tokens, host[i].Tokens) || !slices.Equal(rows[i].Logprobs, host[i].Logprobs) {
			t.Errorf("request %d: row sampling %v %v\nhost path    %v %v", i, rows[i].Tokens, rows[i].Logprobs, host[i].Tokens, host[i].Logprobs)
		}
	}
	for i := range rc {
		if len(rc[i].accepted) != base[0].MaxTokens || !slices.Equal(rc[i].accepted, hc[i].accepted) {
			t.Errorf("constraint %d accepted %v (row path) and %v (host path)", i, rc[i].accepted, hc[i].accepted)
		}
	}
	t.Logf("%d steps sampled masked rows on the backend", masked)
}
