package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// aheadRequests are seeded requests of every kind a sampled step ahead
// holds (temperature, top-k, top-p, min-p, logprobs, greedy rows beside
// them) and one with penalties, whose steps run ahead deferred: sampled
// once the step before is accepted, its history then complete.
func aheadRequests() []engine.Request {
	ps := []sample.Params{
		{Temperature: 1, TopP: 1, RepetitionPenalty: 1},
		{Temperature: 0.8, TopK: 20, TopP: 0.9, Logprobs: 3},
		{Temperature: 1.2, TopP: 0.7, MinP: 0.05},
		{},
		{Temperature: 0, Logprobs: 2},
		{Temperature: 0.9, TopK: 40},
		{Temperature: 1.1, RepetitionPenalty: 1.3, PresencePenalty: 0.5, FrequencyPenalty: 0.4},
	}
	var reqs []engine.Request
	for i, p := range ps {
		seed := uint64(300 + i)
		p.Seed = &seed
		prompt := []int32{1}
		for j := range 3 + 5*i {
			prompt = append(prompt, int32(5+(i*53+j*17)%400))
		}
		n := 14 + 7*i
		if penalised := i == len(ps)-1; penalised {
			n = 9 // ends early: the others run ahead undeferred after it
		}
		reqs = append(reqs, engine.Request{Prompt: prompt, MaxTokens: n, IgnoreEOS: true, Params: p, NeedLogprob: i%2 == 0})
	}
	return reqs
}

// runReqs runs reqs on a fresh engine over m and returns their outputs and
// the engine's counters once it has stopped.
func runReqs(t *testing.T, m engine.Model, cfg engine.Config, reqs []engine.Request) ([]enginetest.Output, engine.Stats) {
	t.Helper()
	e, err := engine.New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	res := generate(t, e, reqs)
	e.Stop() // the loop publishes a step's counters after its tokens
	return res, e.Stats()
}

// sameOutputs fails t where got and want (the outputs of reqs) differ in
// tokens, finish reason, logprobs (of the requests that ask for them: a
// greedy row's is only computed when its step samples on the device) or
// top alternatives.
func sameOutputs(t *testing.T, what string, reqs []engine.Request, got, want []enginetest.Output) {
	t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		if !slices.Equal(g.Tokens, w.Tokens) || g.Reason != w.Reason {
			t.Errorf("request %d: %s %v (%s)\nwant %v (%s)", i, what, g.Tokens, g.Reason, w.Tokens, w.Reason)
			continue
		}
		if r := reqs[i]; (r.NeedLogprob || r.Params.Logprobs > 0) && !slices.Equal(g.Logprobs, w.Logprobs) {
			t.Errorf("request %d: %s logprobs %v\nwant %v", i, what, g.Logprobs, w.Logprobs)
		}
		for j := range w.Top {
			if !slices.Equal(g.Top[j], w.Top[j]) {
				t.Errorf("request %d token %d: %s top %v, want %v", i, j, what, g.Top[j], w.Top[j])
			}
		}
	}
}

// TestRunAheadSampledMatchesStepByStep: sampled steps queued before the
// previous step's tokens are read (model.ForwardSampleAsync, or deferred
// for the penalised row: ForwardQueued, then SampleQueued; on the CPU the
// model resolves the feed tokens from the last sampled ids) draw
// sample.Uniform(seed, output position) at the right position, so seeded
// requests emit exactly the tokens, logprobs and alternatives of
// step-by-step decode, batched or alone, also when two of them end
// mid-way on stop ids.
func TestRunAheadSampledMatchesStepByStep(t *testing.T) {
	m := loadStories(t)
	reqs := aheadRequests()
	cfg := func(mode engine.RunAheadMode, parallel int) engine.Config {
		return engine.Config{Parallel: parallel, MaxQueue: 8, RunAhead: mode}
	}
	want, _ := runReqs(t, m, cfg(engine.RunAheadOff, 7), reqs)
	reqs[1].StopIDs, reqs[1].IgnoreEOS = []int32{want[1].Tokens[4]}, false
	reqs[5].StopIDs, reqs[5].IgnoreEOS = []int32{want[5].Tokens[11]}, false
	want, wst := runReqs(t, m, cfg(engine.RunAheadOff, 7), reqs)
	if want[1].Reason != engine.FinishStop || want[5].Reason != engine.FinishStop {
		t.Fatalf("finish reasons %q %q: the stop ids did not end the requests", want[1].Reason, want[5].Reason)
	}
	got, gst := runReqs(t, m, cfg(engine.RunAheadAlways, 7), reqs)
	sameOutputs(t, "run ahead", reqs, got, want)
	if gst.RunAheadSampled == 0 || wst.RunAheadSteps != 0 {
		t.Errorf("sampled steps run ahead: %d with RunAheadAlways; %d steps with RunAheadOff", gst.RunAheadSampled, wst.RunAheadSteps)
	}
	if gst.DecodeTokens != wst.DecodeTokens || gst.KVBlocksUsed != 0 || gst.Running != 0 {
		t.Errorf("decode tokens %d against %d, blocks in use %d, running %d", gst.DecodeTokens, wst.DecodeTokens, gst.KVBlocksUsed, gst.Running)
	}
	for i, r := range reqs {
		alone, st := runReqs(t, m, cfg(engine.RunAheadAlways, 1), []engine.Request{r})
		sameOutputs(t, "alone, run ahead", reqs[i:i+1], alone, want[i:i+1])
		if st.RunAheadSteps == 0 || st.RunAheadSampled != st.RunAheadSteps && r.Params.Temperature > 0 {
			t.Errorf("request %d alone: %d steps run ahead, %d sampled", i, st.RunAheadSteps, st.RunAheadSampled)
		}
	}
	t.Logf("run ahead: %d of %d steps, %d of them sampled", gst.RunAheadSteps, gst.Steps, gst.RunAheadSampled)
}

// TestRunAheadPreemption: with blocks too few for every sequence, running
// ahead stops where a block is short (sched.Ahead never preempts), the
// next schedule preempts, and the preempted sequences recompute and go on:
// greedy, seeded sampled and penalised (deferred) requests emit what each
// emits alone, step by step.
func TestRunAheadPreemption(t *testing.T) {
	m := loadStories(t)
	for _, kind := range []string{"greedy", "sampled", "deferred"} {
		t.Run(kind, func(t *testing.T) {
			reqs := aheadRequests()[:6]
			for i := range reqs {
				reqs[i].MaxTokens = 40
				switch kind {
				case "greedy":
					reqs[i].Params, reqs[i].NeedLogprob = sample.Params{}, false
				case "deferred": // penalised: sampled once the step before is accepted
					reqs[i].Params.RepetitionPenalty, reqs[i].Params.PresencePenalty = 1.2, 0.3
				}
			}
			want := make([]enginetest.Output, len(reqs))
			for i, r := range reqs {
				out, _ := runReqs(t, m, engine.Config{Parallel: 1, RunAhead: engine.RunAheadOff}, []engine.Request{r})
				want[i] = out[0]
			}
			got, st := runReqs(t, m, engine.Config{Parallel: 6, MaxQueue: 8, BlockSize: 16, NumBlocks: 14, PrefillChunk: 16,
				RunAhead: engine.RunAheadAlways}, reqs)
			sameOutputs(t, "batched, preempted, run ahead", reqs, got, want)
			if st.Preemptions == 0 || st.RunAheadSteps == 0 || (kind != "greedy") != (st.RunAheadSampled > 0) {
				t.Errorf("%d preemptions, %d steps run ahead, %d sampled: want preemptions and run-ahead steps", st.Preemptions,
					st.RunAheadSteps, st.RunAheadSampled)
			}
			if st.KVBlocksUsed != 0 || st.Running != 0 {
				t.Errorf("after all ended: %d blocks in use, %d running", st.KVBlocksUsed, st.Running)
			}
			t.Logf("%d preemptions, %d of %d steps run ahead (%d sampled)", st.Preemptions, st.RunAheadSteps, st.Steps, st.RunAheadSampled)
		})
	}
}

// masksFirst is the model without ForwardSamplePrepared: the engine
// computes the constrained rows' masks before launching the step, as
// before the prepared path.
type masksFirst struct {
	engine.Model
	m *model.Model
}

func (w masksFirst) CanSampleRows() bool { return w.m.CanSampleRows() }
func (w masksFirst) ForwardSample(b *backend.Batch, kv backend.KVStore, rows []backend.SampleRow) ([]backend.Sampled, error) {
	return w.m.ForwardSample(b, kv, rows)
}

// preparedCounter counts the prepared steps and checks that each calls
// prepare once, after the forward was launched and before sampling.
type preparedCounter struct {
	*model.Model
	t        *testing.T
	prepared *int
}

func (m preparedCounter) ForwardSamplePrepared(b *backend.Batch, kv backend.KVStore, prepare func() ([]backend.SampleRow, error)) ([]backend.Sampled, error) {
	calls := 0
	res, err := m.Model.ForwardSamplePrepared(b, kv, func() ([]backend.SampleRow, error) {
		calls++
		return prepare()
	})
	if calls != 1 {
		m.t.Errorf("prepare called %d times in a step", calls)
	}
	*m.prepared++
	return res, err
}

// failingConstraint is hashConstraint whose Mask fails at step failAt.
type failingConstraint struct {
	hashConstraint
	failAt int
}

var errGrammar = errors.New("grammar exhausted")

func (c *failingConstraint) Mask(allowed []uint64) error {
	if c.step == c.failAt {
		return errGrammar
	}
	return c.hashConstraint.Mask(allowed)
}

// TestConstrainedPreparedMatchesMasksFirst: constrained rows whose masks
// are computed while the step's forward runs (ForwardSamplePrepared; and
// running ahead, the forward queued with FeedTokens and the masks computed
// once the step before is accepted) give the tokens, logprobs and
// accepted sequences of masks computed before the step and of the host
// path, beside greedy and sampled unconstrained rows; a constraint failing
// mid-way ends its request with the same error on every path and leaves
// the others alone.
func TestConstrainedPreparedMatchesMasksFirst(t *testing.T) {
	m := loadStories(t)
	base := aheadRequests()
	type result struct {
		tokens   [][]int32
		logprobs [][]float32
		reasons  []string
		errs     []error
		accepted [][]int32
		ahead    uint64 // steps run ahead deferred
	}
	run := func(mm engine.Model, mode engine.RunAheadMode) result {
		reqs := slices.Clone(base)
		cs := map[int]*failingConstraint{}
		for i := range reqs {
			if i%3 == 2 {
				continue // unconstrained
			}
			c := &failingConstraint{hashConstraint: hashConstraint{vocab: m.Vocab()}, failAt: -1}
			if i == 4 {
				c.failAt = 6
			}
			reqs[i].Constraint, cs[i] = c, c
		}
		e, err := engine.New(mm, engine.Config{Parallel: 7, MaxQueue: 8, RunAhead: mode})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		var ss []*engine.Stream
		for _, r := range reqs {
			s, err := e.Submit(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			ss = append(ss, s)
		}
		e.Start()
		res := result{tokens: make([][]int32, len(ss)), logprobs: make([][]float32, len(ss)), reasons: make([]string, len(ss)),
			errs: make([]error, len(ss)), accepted: make([][]int32, len(ss))}
		for i, s := range ss {
			for ev := range s.Events() {
				if ev.Done {
					res.reasons[i], res.errs[i] = ev.FinishReason, ev.Err
					break
				}
				res.tokens[i] = append(res.tokens[i], ev.Token)
				res.logprobs[i] = append(res.logprobs[i], ev.Logprob)
			}
			if c := cs[i]; c != nil {
				res.accepted[i] = c.accepted
			}
		}
		e.Stop()
		res.ahead = e.Stats().RunAheadSampled
		return res
	}
	prepared := 0
	got := run(preparedCounter{m, t, &prepared}, engine.RunAheadOff)
	first, host := run(masksFirst{m, m}, engine.RunAheadOff), run(logitsOnly{m}, engine.RunAheadOff)
	ahead := run(m, engine.RunAheadAlways)
	if prepared == 0 || ahead.ahead == 0 {
		t.Fatalf("%d steps took the prepared path, %d ran ahead deferred", prepared, ahead.ahead)
	}
	for name, want := range map[string]result{"masks first": first, "host path": host, "run ahead, deferred": ahead} {
		for i := range base {
			if !slices.Equal(got.tokens[i], want.tokens[i]) || !slices.Equal(got.logprobs[i], want.logprobs[i]) ||
				got.reasons[i] != want.reasons[i] || !slices.Equal(got.accepted[i], want.accepted[i]) {
				t.Errorf("request %d: prepared %v %v (%s)\n%s %v %v (%s)", i, got.tokens[i], got.logprobs[i], got.reasons[i], name,
					want.tokens[i], want.logprobs[i], want.reasons[i])
			}
			if (got.errs[i] == nil) != (want.errs[i] == nil) || got.errs[i] != nil && got.errs[i].Error() != want.errs[i].Error() {
				t.Errorf("request %d: prepared error %v, %s error %v", i, got.errs[i], name, want.errs[i])
			}
		}
	}
	if !errors.Is(got.errs[4], errGrammar) || len(got.tokens[4]) != 6 || got.reasons[4] != engine.FinishError {
		t.Errorf("the failing constraint's request: %d tokens, %q, %v; want 6 tokens and its error", len(got.tokens[4]), got.reasons[4], got.errs[4])
	}
	for i := range base {
		if i != 4 && (got.errs[i] != nil || len(got.tokens[i]) != base[i].MaxTokens) {
			t.Errorf("request %d: %d of %d tokens, error %v", i, len(got.tokens[i]), base[i].MaxTokens, got.errs[i])
		}
	}
	t.Logf("%d prepared steps", prepared)
}
