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
// request draws what it draws step by step. A constraint's mask, a logit
// bias (host path) and the penalties do need it: penalties count the
// tokens so far, and merging the fed token into a row's history on the
// device would mean a deduplicating pass in sample_rows for loads that
// rarely set them (OpenAI's defaults are off). Such steps run one by one.

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
// waiting for the tokens (*model.Model).
type asyncSampler interface {
	rowSampling
	ForwardSampleAsync(b *backend.Batch, kv backend.KVStore, rows []backend.SampleRow) (backend.PendingSamples, error)
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

// queued is a step on the device whose tokens have not been read: an
// argmax (ids) or a sampling (sampled).
type queued struct {
	plan    sched.Plan
	ids     backend.PendingIDs
	sampled backend.PendingSamples
	err     error // the queueing failed: the step's sequences end with it
	start   time.Time
}

// aheadable reports whether plan is a step running ahead can follow: one
// decode token per sequence, every sequence pure greedy or sampled with
// what a step ahead can sample with.
func (e *Engine) aheadable(plan *sched.Plan) bool {
	if !e.runAhead || plan.PrefillTokens > 0 || len(plan.Items) == 0 {
		return false
	}
	for _, it := range plan.Items {
		r := &e.reqs[it.Seq.ID].req
		if it.Prefill || it.Len != 1 || !it.Logits || !(argmaxOnly(r) || e.sampleAhead && sampledAhead(r)) {
			return false
		}
	}
	return true
}

// aheadRows is the sampling rows of plan's items, each request's output
// position advanced by ahead (1 for a step queued before the previous
// step's tokens are accepted), or nil when every item is pure greedy: the
// step then takes the argmax path. Mixed steps sample every row on the
// device, as trySampleRows does, so running ahead changes no token.
func (e *Engine) aheadRows(plan *sched.Plan, ahead uint64) []backend.SampleRow {
	greedy := true
	for _, it := range plan.Items {
		greedy = greedy && argmaxOnly(&e.reqs[it.Seq.ID].req)
	}
	if greedy {
		return nil
	}
	rows := make([]backend.SampleRow, len(plan.Items))
	for i, it := range plan.Items {
		rows[i] = e.reqs[it.Seq.ID].sampleRow()
		rows[i].Counter += ahead
	}
	return rows
}

// runAheadFrom runs plan (aheadable) and the steps queued behind it.
func (e *Engine) runAheadFrom(plan *sched.Plan, start time.Time) {
	cur := e.queue(plan, e.buildBatch(plan), e.aheadRows(plan, 0), start)
	for cur != nil {
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

// queue launches one step without waiting for its tokens: its argmax, or
// its sampling with rows.
func (e *Engine) queue(plan *sched.Plan, b *backend.Batch, rows []backend.SampleRow, start time.Time) *queued {
	q := &queued{plan: *plan, start: start}
	defer func() {
		if p := recover(); p != nil {
			q.err = fmt.Errorf("panic: %v", p)
		}
	}()
	if rows != nil {
		q.sampled, q.err = e.m.(asyncSampler).ForwardSampleAsync(b, e.kvStore, rows)
	} else {
		q.ids, q.err = e.m.(asyncArgmaxer).ForwardArgmaxAsync(b, e.kvStore)
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
	rows := e.aheadRows(&plan, 1)
	e.statsMu.Lock()
	e.stats.RunAheadSteps++
	if rows != nil {
		e.stats.RunAheadSampled++
	}
	e.statsMu.Unlock()
	return e.queue(&plan, b, rows, time.Now())
}
