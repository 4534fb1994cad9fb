//go:build linux

package cuda

import (
	"math"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// aheadGPURequests are 12 seeded requests: sampled, greedy with logprobs,
// greedy, and one penalised (request 6), whose steps run ahead deferred
// until it ends (its 42nd token), the others' undeferred after.
func aheadGPURequests(vocab int) []engine.Request {
	ps := []sample.Params{
		{Temperature: 1, TopP: 1},
		{Temperature: 0.8, TopK: 20, TopP: 0.9, Logprobs: 3},
		{Temperature: 1.2, TopP: 0.7, MinP: 0.05},
		{Temperature: 0, Logprobs: 2},
		{Temperature: 0.8, TopP: 0.95},
		{},
		{Temperature: 1.1, RepetitionPenalty: 1.2, PresencePenalty: 0.3},
	}
	var reqs []engine.Request
	for i := range 12 {
		p := ps[i%len(ps)]
		seed := uint64(2000 + i)
		p.Seed = &seed
		prompt := []int32{1}
		for j := range 3 + i%5 {
			prompt = append(prompt, int32(2+(i*43+j*17)%(vocab-2)))
		}
		reqs = append(reqs, engine.Request{Prompt: prompt, MaxTokens: 24 + 3*i, IgnoreEOS: true, Params: p, NeedLogprob: true})
	}
	return reqs
}

// TestEngineRunAheadSampledGPU: on the GPU sampled decode runs ahead by
// default (the backend is an AsyncRowSampler): sample_rows leaves each
// step's ids in the feed buffer the next step's embedding reads, and the
// results come back through the argmax path's queued copies; while the
// penalised request runs, each step's sample_rows is launched after its
// forward, once the step before is accepted (deferred). Seeded
// requests, two ending on stop ids mid-way, must emit exactly what
// step-by-step decode emits on the same device: the same batches, the
// same kernels, the same draws.
func TestEngineRunAheadSampledGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	m := loadTinyLlamaQ4(t, b)
	reqs := aheadGPURequests(m.Vocab())
	run := func(mode engine.RunAheadMode, cfg engine.Config) ([]enginetest.Output, engine.Stats) {
		cfg.RunAhead, cfg.MaxContext = mode, 256
		e, err := engine.New(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		out := enginetest.Generate(t, e, reqs)
		e.Stop()
		return out, e.Stats()
	}
	cfg := engine.Config{Parallel: 12}
	want, _ := run(engine.RunAheadOff, cfg)
	reqs[1].StopIDs, reqs[1].IgnoreEOS = []int32{want[1].Tokens[5]}, false
	reqs[4].StopIDs, reqs[4].IgnoreEOS = []int32{want[4].Tokens[9]}, false
	want, _ = run(engine.RunAheadOff, cfg)
	got, st := run(engine.RunAheadAuto, cfg)
	worst := 0.0
	for i := range reqs {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) || got[i].Reason != want[i].Reason {
			t.Errorf("request %d: run ahead %v (%s)\nstep by step %v (%s)", i, got[i].Tokens, got[i].Reason, want[i].Tokens, want[i].Reason)
			continue
		}
		for j := range want[i].Logprobs {
			worst = max(worst, math.Abs(float64(got[i].Logprobs[j]-want[i].Logprobs[j])))
		}
	}
	if worst > 1e-5 {
		t.Errorf("logprobs differ by up to %g between run-ahead and step-by-step decode", worst)
	}
	if st.RunAheadSampled == 0 || st.KVBlocksUsed != 0 {
		t.Errorf("%d sampled steps run ahead (want most on the GPU), %d blocks still in use", st.RunAheadSampled, st.KVBlocksUsed)
	}
	t.Logf("run ahead: %d of %d steps (%d sampled); logprobs within %g", st.RunAheadSteps, st.Steps, st.RunAheadSampled, worst)

	// A tight cache (blocks for about half the sequences, prefill in
	// chunks of 16): another schedule than the roomy run's, so on the GPU a
	// sampled request may part from it where the other batches' kernels
	// round a boundary differently (s15b: 3 of 12). Against step-by-step
	// decode of the same schedule the tokens must be exactly the same.
	// (Preemption under run-ahead token for token: TestRunAheadPreemption,
	// CPU.)
	tight := engine.Config{Parallel: 12, BlockSize: 16, NumBlocks: 30, PrefillChunk: 16}
	tightWant, _ := run(engine.RunAheadOff, tight)
	pre, pst := run(engine.RunAheadAuto, tight)
	for i := range reqs {
		if !slices.Equal(pre[i].Tokens, tightWant[i].Tokens) {
			t.Errorf("request %d (%+v), tight cache: run ahead %v\nstep by step %v", i, reqs[i].Params, pre[i].Tokens, tightWant[i].Tokens)
		}
	}
	if pst.RunAheadSampled == 0 || pst.KVBlocksUsed != 0 {
		t.Errorf("tight cache: %d sampled steps run ahead, %d blocks in use", pst.RunAheadSampled, pst.KVBlocksUsed)
	}
	t.Logf("tight cache: %d preemptions, %d of %d steps run ahead", pst.Preemptions, pst.RunAheadSteps, pst.Steps)
}

// masksBefore hides the model's ForwardSamplePrepared: the engine computes
// the masks before it launches the step.
type masksBefore struct {
	engine.Model
	m *model.Model
}

func (w masksBefore) CanSampleRows() bool { return w.m.CanSampleRows() }
func (w masksBefore) ForwardSample(b *backend.Batch, kv backend.KVStore, rows []backend.SampleRow) ([]backend.Sampled, error) {
	return w.m.ForwardSample(b, kv, rows)
}

// TestEnginePreparedConstrainedGPU: constrained rows sample exactly what
// masks computed before each step give (sample_rows in the step's graph):
// run one step at a time, each step's forward launched first
// (LaunchRecorded) and sample_rows alone once the host has the masks; and
// running ahead deferred, each decode step's forward queued with
// FeedTokens before the step before is read, its masks computed once that
// step is accepted. The same logits, masks and draws.
func TestEnginePreparedConstrainedGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	m := loadTinyLlamaQ4(t, b)
	reqs := rowSamplingRequests(m.Vocab())
	run := func(mm engine.Model, mode engine.RunAheadMode) ([]enginetest.Output, engine.Stats) {
		rs := slices.Clone(reqs)
		for i := range rs {
			if i%2 == 0 {
				rs[i].Constraint = &stepHashConstraint{vocab: m.Vocab(), salt: uint32(i)}
			}
		}
		e, err := engine.New(mm, engine.Config{Parallel: 16, MaxContext: 256, RunAhead: mode})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		out := enginetest.Generate(t, e, rs)
		for i := range rs {
			if c, ok := rs[i].Constraint.(*stepHashConstraint); ok && c.accepted != rs[i].MaxTokens {
				t.Errorf("request %d: its constraint accepted %d tokens, want %d", i, c.accepted, rs[i].MaxTokens)
			}
		}
		e.Stop()
		return out, e.Stats()
	}
	want, _ := run(masksBefore{m, m}, engine.RunAheadAuto)
	prepared, _ := run(m, engine.RunAheadOff)
	ahead, st := run(m, engine.RunAheadAuto)
	for name, got := range map[string][]enginetest.Output{"prepared": prepared, "run ahead, deferred": ahead} {
		for i := range reqs {
			if !slices.Equal(got[i].Tokens, want[i].Tokens) || !slices.Equal(got[i].Logprobs, want[i].Logprobs) {
				t.Errorf("request %d: %s %v\nmasks first %v", i, name, got[i].Tokens, want[i].Tokens)
			}
		}
	}
	if st.RunAheadSampled == 0 {
		t.Error("no constrained step ran ahead")
	}
	c, r, _, f, lastErr := b.GraphStats()
	t.Logf("run ahead: %d of %d steps; graphs: %d captured, %d replays, %d failed (%v)", st.RunAheadSampled, st.Steps, c, r, f, lastErr)
}
