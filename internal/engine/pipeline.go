package engine

import (
	"fmt"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine/sched"
)

// Pipelined greedy decode ("run ahead", vLLM's asynchronous scheduling).
// A decode step whose sequences are all pure greedy is queued with its
// argmax (Model.ForwardArgmaxAsync), and before its ids come back the
// next step of the same sequences is queued too, each token a
// backend.FeedToken naming its row of the step before: the device
// resolves it. The host's work for a step (batch, recording, launch:
// 110-210 us a step on the H200 machine) then overlaps the device's.
//
// A sequence that ends on the earlier step's token (a stop id) has had one
// token more computed: its KV write lands in blocks it frees, its id is
// dropped. Running ahead stops whenever the next step might differ from
// "the same sequences, one token further": new or waiting requests, a
// cancellation, a sequence at its last token, blocks short, shutdown.

// RunAheadMode selects pipelined greedy decode.
type RunAheadMode int

const (
	// RunAheadAuto runs ahead when the model's backend queues steps
	// asynchronously (backend.AsyncArgmaxer: CUDA).
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

// runsAhead reports whether the engine pipelines greedy decode steps.
func runsAhead(m Model, mode RunAheadMode) bool {
	if _, ok := m.(asyncArgmaxer); !ok || mode == RunAheadOff {
		return false
	}
	_, async := m.Backend().(backend.AsyncArgmaxer)
	return async || mode == RunAheadAlways
}

// queued is a step on the device whose ids have not been read.
type queued struct {
	plan    sched.Plan
	pending backend.PendingIDs
	err     error // the queueing failed: the step's sequences end with it
	start   time.Time
}

// aheadable reports whether plan is a step running ahead can follow: one
// decode token per sequence, every sequence pure greedy.
func (e *Engine) aheadable(plan *sched.Plan) bool {
	if !e.runAhead || plan.PrefillTokens > 0 || len(plan.Items) == 0 {
		return false
	}
	for _, it := range plan.Items {
		r := &e.reqs[it.Seq.ID].req
		if it.Prefill || it.Len != 1 || !it.Logits || !argmaxOnly(r) {
			return false
		}
	}
	return true
}

// runAheadFrom runs plan (aheadable) and the steps queued behind it.
func (e *Engine) runAheadFrom(plan *sched.Plan, start time.Time) {
	cur := e.queue(plan, e.buildBatch(plan), start)
	for cur != nil {
		var next *queued
		if cur.err == nil {
			next = e.queueAhead(cur)
		}
		ids, err := cur.wait()
		if next != nil {
			// The step ahead was queued during cur; its duration (StepStats,
			// the step histogram) runs from here, as a step's would.
			next.start = time.Now()
		}
		if err == nil && len(ids) != len(cur.plan.Items) {
			err = fmt.Errorf("model returned %d ids for %d rows", len(ids), len(cur.plan.Items))
		}
		e.acceptGreedy(&cur.plan, ids, err, cur.start)
		cur = next
	}
}

// wait returns the step's ids, turning a panic into an error as forward
// does for the synchronous path.
func (q *queued) wait() (ids []int32, err error) {
	if q.err != nil {
		return nil, q.err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return q.pending.Wait()
}

// queue launches one greedy step without waiting for its ids.
func (e *Engine) queue(plan *sched.Plan, b *backend.Batch, start time.Time) *queued {
	q := &queued{plan: *plan, start: start}
	defer func() {
		if p := recover(); p != nil {
			q.err = fmt.Errorf("panic: %v", p)
		}
	}()
	q.pending, q.err = e.m.(asyncArgmaxer).ForwardArgmaxAsync(b, e.kvStore)
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
	e.statsMu.Lock()
	e.stats.RunAheadSteps++
	e.statsMu.Unlock()
	return e.queue(&plan, b, time.Now())
}
