package engine

import (
	"fmt"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine/sched"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// Pipelined decode ("run ahead", vLLM's asynchronous scheduling). A
// decode step whose sequences are all pure greedy is queued with its
// argmax (Model.ForwardArgmaxAsync), one with sampled rows with its
// sampling on the device (Model.ForwardSampleAsync), and before its ids
// come back the next step of the same sequences is queued too, each token
// a backend.FeedToken naming its row of the step before: the device
// resolves it. The host's work for a step (batch, recording, launch:
// 110-210 us a step on the H200 machine) then overlaps the device's.
//
// A sequence that ends on the earlier step's token (a stop id) has had one
// token more computed: its KV write lands in blocks it frees, its id is
// dropped. Running ahead stops whenever the next step might differ from
// "the same sequences, one token further": new or waiting requests, a
// cancellation, a sequence at its last token, blocks short, shutdown.
//
// A sampled row runs ahead when nothing it samples with needs the token
// still on the device: the draw is sample.Uniform(seed, output position),
// and the step ahead's position is one past the host's count, so a seeded
// request draws what it draws step by step. A constraint's mask and the
// penalties (the token counts so far) do need it; a step holding such a
// row runs ahead deferred: its forward is queued with the FeedTokens
// (Model.ForwardQueued), and its sampling (Model.SampleQueued) once the
// step before has been accepted and the rows are built, while the device
// runs that forward. Merging the fed token into a penalised row's history
// on the device instead would take a deduplicating pass in sample_rows.
// The logit bias stays on the host path and never runs ahead.

// RunAheadMode selects pipelined decode.
type RunAheadMode int

const (
	// RunAheadAuto runs ahead when the model's backend queues steps
	// asynchronously (backend.AsyncArgmaxer; sampled steps also
	// backend.AsyncRowSampler: CUDA).
	RunAheadAuto RunAheadMode = iota
	// RunAheadOff never runs ahead.
	RunAheadOff
	// RunAheadAlways runs ahead on any backend with an async-capable
	// model; on a synchronous backend this only computes each step
	// earlier (tests use it to check the bookkeeping on the CPU).
	RunAheadAlways
)

// asyncArgmaxer is a model that queues a step and its argmax without
// waiting for the ids (*model.Model).
type asyncArgmaxer interface {
	ForwardArgmaxAsync(b *backend.Batch, kv backend.KVStore) (backend.PendingIDs, error)
}

// asyncSampler is a model that queues a step and its sampling without
// waiting for the tokens, or the forward first and its sampling later
// (*model.Model).
type asyncSampler interface {
	rowSampling
	ForwardSampleAsync(b *backend.Batch, kv backend.KVStore, rows []backend.SampleRow) (backend.PendingSamples, error)
	ForwardQueued(b *backend.Batch, kv backend.KVStore) (backend.Tensor, error)
	SampleQueued(logits backend.Tensor, rows []backend.SampleRow) (backend.PendingSamples, error)
}

// runsAhead reports whether the engine pipelines greedy decode steps, and
// sampled ones.
func runsAhead(m Model, mode RunAheadMode) (greedy, sampled bool) {
	if _, ok := m.(asyncArgmaxer); !ok || mode == RunAheadOff {
		return false, false
	}
	_, async := m.Backend().(backend.AsyncArgmaxer)
	greedy = async || mode == RunAheadAlways
	if s, ok := m.(asyncSampler); ok && greedy && s.CanSampleRows() {
		_, async = m.Backend().(backend.AsyncRowSampler)
		sampled = async || mode == RunAheadAlways
	}
	return greedy, sampled
}

// sampledAhead reports whether r's next token can be sampled by a step
// queued before r's previous token is known (see above).
func sampledAhead(r *Request) bool {
	return r.Constraint == nil && rowSampleable(r) && !penalised(r.Params)
}

// How a step running ahead picks its tokens.
type aheadKind int

const (
	aheadArgmax   aheadKind = iota // every row pure greedy
	aheadSample                    // every row sampledAhead: sampled with the forward
	aheadDeferred                  // a constrained or penalised row: sampled after the step before is accepted
)

// queued is a step on the device whose tokens have not been read: an
// argmax (ids) or a sampling (sampled); a deferred step has only its
// forward (logits) queued until sampleDeferred.
type queued struct {
	plan    sched.Plan
	kind    aheadKind
	ids     backend.PendingIDs
	sampled backend.PendingSamples
	logits  backend.Tensor
	err     error // the queueing failed: the step's sequences end with it
	start   time.Time
}

// aheadable reports whether plan is a step running ahead can follow: one
// decode token per sequence, every sequence pure greedy or, when the
// model samples ahead, sampled on the backend (no logit bias).
func (e *Engine) aheadable(plan *sched.Plan) bool {
	if !e.runAhead || plan.PrefillTokens > 0 || len(plan.Items) == 0 {
		return false
	}
	for _, it := range plan.Items {
		r := &e.reqs[it.Seq.ID].req
		if it.Prefill || it.Len != 1 || !it.Logits || !(argmaxOnly(r) || e.sampleAhead && rowSampleable(r)) {
			return false
		}
	}
	return true
}

// kindOf is how plan's step picks its tokens. Mixed steps sample every
// row on the device, as trySampleRows does, so running ahead changes no
// token.
func (e *Engine) kindOf(plan *sched.Plan) aheadKind {
	k := aheadArgmax
	for _, it := range plan.Items {
		r := &e.reqs[it.Seq.ID].req
		switch {
		case !sampledAhead(r):
			return aheadDeferred
		case !argmaxOnly(r):
			k = aheadSample
		}
	}
	return k
}

// aheadRows is the sampling rows of plan's items, each request's output
// position advanced by ahead (1 for a step queued before the previous
// step's tokens are accepted). A request that ended since the step was
// queued gets a greedy row, whose token is dropped.
func (e *Engine) aheadRows(plan *sched.Plan, ahead uint64) []backend.SampleRow {
	rows := make([]backend.SampleRow, len(plan.Items))
	for i, it := range plan.Items {
		if r := e.reqs[it.Seq.ID]; r != nil {
			rows[i] = r.sampleRow()
			rows[i].Counter += ahead
		}
	}
	return rows
}

// runAheadFrom runs plan (aheadable) and the steps queued behind it.
func (e *Engine) runAheadFrom(plan *sched.Plan, start time.Time) {
	cur := e.queue(plan, e.buildBatch(plan), 0, start)
	for cur != nil {
		if cur.kind == aheadDeferred && cur.err == nil {
			e.sampleDeferred(cur)
		}
		var next *queued
		if cur.err == nil {
			next = e.queueAhead(cur)
		}
		res, err := cur.wait()
		if next != nil {
			// The step ahead was queued during cur; its duration (StepStats,
			// the step histogram) runs from here, as a step's would.
			next.start = time.Now()
		}
		e.acceptRows(&cur.plan, res, err, cur.start)
		cur = next
	}
}

// sampleDeferred queues the sampling of a deferred step: every earlier
// token is accepted, so the rows' masks and histories are up to date, and
// the device runs the step's forward meanwhile. A request whose mask
// fails ends here (its row samples unmasked and is dropped).
func (e *Engine) sampleDeferred(q *queued) {
	defer func() {
		if p := recover(); p != nil {
			q.err = fmt.Errorf("panic: %v", p)
		}
	}()
	rows := e.aheadRows(&q.plan, 0)
	var masked []maskJob
	for i, it := range q.plan.Items {
		if r := e.reqs[it.Seq.ID]; r != nil && r.req.Constraint != nil {
			masked = append(masked, maskJob{r: r, row: i})
		}
	}
	e.maskRows(masked, rows)
	for _, j := range masked {
		if j.err != nil {
			e.finish(j.r, FinishError, fmt.Errorf("engine: constraint: %w", j.err), nil)
		}
	}
	q.sampled, q.err = e.m.(asyncSampler).SampleQueued(q.logits, rows)
	q.logits = nil
}

// wait returns the step's tokens by row, turning a panic into an error as
// forward does for the synchronous path.
func (q *queued) wait() (res func(row int) sample.Result, err error) {
	if q.err != nil {
		return nil, q.err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	n := len(q.plan.Items)
	if q.sampled != nil {
		got, err := q.sampled.Wait()
		if err == nil && len(got) != n {
			err = fmt.Errorf("model returned %d tokens for %d rows", len(got), n)
		}
		out := sampledResults(got)
		return func(row int) sample.Result { return out[row] }, err
	}
	ids, err := q.ids.Wait()
	if err == nil && len(ids) != n {
		err = fmt.Errorf("model returned %d ids for %d rows", len(ids), n)
	}
	return func(row int) sample.Result { return sample.Result{ID: ids[row]} }, err
}

// queue launches one step without waiting for its tokens: its argmax, its
// sampling (rows for output positions advanced by ahead), or only its
// forward (deferred).
func (e *Engine) queue(plan *sched.Plan, b *backend.Batch, ahead uint64, start time.Time) *queued {
	q := &queued{plan: *plan, start: start, kind: aheadArgmax}
	if e.sampleAhead {
		q.kind = e.kindOf(plan)
	}
	defer func() {
		if p := recover(); p != nil {
			q.err = fmt.Errorf("panic: %v", p)
		}
	}()
	switch q.kind {
	case aheadArgmax:
		q.ids, q.err = e.m.(asyncArgmaxer).ForwardArgmaxAsync(b, e.kvStore)
	case aheadSample:
		q.sampled, q.err = e.m.(asyncSampler).ForwardSampleAsync(b, e.kvStore, e.aheadRows(plan, ahead))
	case aheadDeferred:
		q.logits, q.err = e.m.(asyncSampler).ForwardQueued(b, e.kvStore)
	}
	return q
}

// queueAhead queues the step after cur for cur's sequences that are still
// live, or returns nil when running ahead must stop here.
func (e *Engine) queueAhead(cur *queued) *queued {
	select {
	case <-e.quit:
		return nil
	default:
	}
	e.mu.Lock()
	arrivals := len(e.inbox)
	e.mu.Unlock()
	if arrivals > 0 || e.sched.NumWaiting() > 0 {
		return nil // admissions change the next step: plan it afresh
	}
	b := &e.batch
	b.Tokens, b.Positions, b.Seqs, b.LogitRows = b.Tokens[:0], b.Positions[:0], b.Seqs[:0], b.LogitRows[:0]
	var plan sched.Plan
	for row, it := range cur.plan.Items {
		r := e.reqs[it.Seq.ID]
		if r == nil {
			continue // ended on an earlier step's token: its row is dropped
		}
		if r.stream.ctx.Err() != nil || r.stream.finishRequested.Load() {
			return nil // let the loop reap it first
		}
		// cur's token is this request's generated+1-th and, at the
		// length limit, its last (accept ends it): no step after it.
		if r.generated+2 > r.req.MaxTokens || len(r.seq.Tokens)+2 > e.maxContext {
			continue
		}
		ahead, ok := e.sched.Ahead(it.Seq)
		if !ok {
			return nil
		}
		b.Seqs = append(b.Seqs, backend.SeqSlice{Start: len(b.Tokens), Len: 1, Blocks: ahead.Blocks, Slot: ahead.Slot})
		b.LogitRows = append(b.LogitRows, len(b.Tokens))
		b.Tokens = append(b.Tokens, backend.FeedToken(row))
		b.Positions = append(b.Positions, int32(ahead.Start))
		plan.Items = append(plan.Items, ahead)
		plan.DecodeTokens++
	}
	if len(plan.Items) == 0 {
		return nil
	}
	q := e.queue(&plan, b, 1, time.Now())
	e.statsMu.Lock()
	e.stats.RunAheadSteps++
	if q.kind != aheadArgmax {
		e.stats.RunAheadSampled++
	}
	e.statsMu.Unlock()
	return q
}
