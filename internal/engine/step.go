package engine

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine/sched"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// errStalled is internal: the scheduler produced nothing although work is
// queued and nothing runs. The scheduler's admission rule makes this
// impossible; failing the head request keeps a bug from hanging the engine.
var errStalled = errors.New("engine: request cannot be scheduled")

// loop is the engine goroutine.
func (e *Engine) loop() {
	// A GPU backend binds its context to the calling OS thread; every
	// backend call must come from this one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(e.done)
	for {
		select {
		case <-e.quit:
			e.shutdown()
			return
		default:
		}
		e.drainInbox()
		e.reapCancelled()
		start := time.Now()
		if e.cfg.ITLTarget > 0 {
			e.sched.SetMixedPrefill(e.cost.prefillBudget(e.cfg.ITLTarget))
		}
		plan := e.sched.Schedule()
		if plan.Empty() {
			if len(plan.Preempted) > 0 {
				// The only running sequence preempted itself; the next
				// schedule re-admits it.
				e.statsMu.Lock()
				e.stats.Preemptions += uint64(len(plan.Preempted))
				e.statsMu.Unlock()
				continue
			}
			if e.sched.NumWaiting() > 0 {
				e.finish(e.reqs[e.sched.Waiting()[0].ID], FinishError, errStalled, nil)
				continue
			}
			e.publish(nil, 0)
			select {
			case <-e.wake:
			case <-e.quit:
			}
			continue
		}
		e.runPlan(&plan, start)
	}
}

// drainInbox moves submitted requests into the scheduler.
func (e *Engine) drainInbox() {
	e.mu.Lock()
	in := e.inbox
	e.inbox = nil
	e.mu.Unlock()
	for _, r := range in {
		e.reqs[r.seq.ID] = r
		e.sched.Add(&r.seq)
	}
}

// reapCancelled ends requests whose consumer cancelled or finished them,
// freeing their KV
// blocks before the next plan is made.
func (e *Engine) reapCancelled() {
	for _, r := range e.reqs {
		if err := r.stream.ctx.Err(); err != nil {
			e.finish(r, FinishCancelled, err, nil)
		} else if r.stream.finishRequested.Load() {
			e.finish(r, FinishStop, nil, nil)
		}
	}
}

// shutdown ends every unfinished request with ErrStopped.
func (e *Engine) shutdown() {
	e.drainInbox()
	for _, r := range e.reqs {
		e.finish(r, FinishError, ErrStopped, nil)
	}
	e.publish(nil, 0)
}

// sampleJob is one logits row to sample.
type sampleJob struct {
	r      *request
	logits []float32
	res    sample.Result
	err    error
}

// runPlan executes one step: batch, forward, sample, emit.
func (e *Engine) runPlan(plan *sched.Plan, start time.Time) {
	now := time.Now()
	for _, q := range plan.Admitted {
		if r := e.reqs[q.ID]; r.admitted.IsZero() {
			r.admitted = now
			r.cachedTokens = q.CachedTokens
		}
	}
	if e.aheadable(plan) {
		e.runAheadFrom(plan, start)
		return
	}
	if err := e.restoreSlots(plan); err != nil {
		for _, it := range plan.Items {
			e.finish(e.reqs[it.Seq.ID], FinishError, err, nil)
		}
		e.publish(plan, time.Since(start))
		return
	}
	b := e.buildBatch(plan)
	if ids, ok, err := e.tryGreedy(plan, b); ok {
		e.acceptGreedy(plan, ids, err, start)
		return
	}
	if res, ok, err := e.trySampleRows(plan, b); ok {
		e.acceptRows(plan, func(row int) sample.Result { return res[row] }, err, start)
		return
	}
	logits, err := e.forward(b)
	if err == nil && len(logits) != len(b.LogitRows)*e.vocab {
		err = fmt.Errorf("model returned %d logits for %d rows of %d", len(logits), len(b.LogitRows), e.vocab)
	}
	if err != nil {
		// The step's KV writes are suspect: end every sequence in it.
		// Sequences not in this batch are untouched and carry on.
		err = fmt.Errorf("engine: forward: %w", err)
		for _, it := range plan.Items {
			e.finish(e.reqs[it.Seq.ID], FinishError, err, nil)
		}
		e.publish(plan, time.Since(start))
		return
	}
	e.saveSlots(plan)

	jobs := make([]sampleJob, 0, len(b.LogitRows))
	for _, it := range plan.Items {
		it.Seq.Computed += it.Len
		if it.Logits {
			row := len(jobs)
			jobs = append(jobs, sampleJob{r: e.reqs[it.Seq.ID], logits: logits[row*e.vocab : (row+1)*e.vocab]})
		}
	}
	e.sampleAll(jobs)
	now = time.Now()
	for i := range jobs {
		j := &jobs[i]
		if j.err != nil {
			e.finish(j.r, FinishError, j.err, nil)
			continue
		}
		e.accept(j.r, j.res, now)
	}
	e.publish(plan, time.Since(start))
}

// argmaxer is a model that can return the argmax token per logit row
// without handing the logits back (*model.Model can).
type argmaxer interface {
	ForwardArgmax(b *backend.Batch, kv backend.KVStore) ([]int32, error)
}

// pureGreedy reports whether sampling p is exactly argmax of the raw
// logits: no temperature, penalties or logprobs to compute.
func pureGreedy(p sample.Params) bool {
	return p.Temperature < 1e-5 && p.Logprobs == 0 && (p.RepetitionPenalty == 0 || p.RepetitionPenalty == 1) &&
		p.PresencePenalty == 0 && p.FrequencyPenalty == 0 && len(p.LogitBias) == 0
}

// tryGreedy runs the step through the model's argmax path when every
// sequence that samples this step is pure greedy; ok is false when the
// normal logits path must run instead.
func (e *Engine) tryGreedy(plan *sched.Plan, b *backend.Batch) (ids []int32, ok bool, err error) {
	am, can := e.m.(argmaxer)
	if !can || len(b.LogitRows) == 0 {
		return nil, false, nil
	}
	for _, it := range plan.Items {
		if r := &e.reqs[it.Seq.ID].req; it.Logits && !argmaxOnly(r) {
			return nil, false, nil
		}
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	ids, err = am.ForwardArgmax(b, e.kvStore)
	if err == nil && len(ids) != len(b.LogitRows) {
		err = fmt.Errorf("model returned %d ids for %d rows", len(ids), len(b.LogitRows))
	}
	return ids, true, err
}

// acceptGreedy is runPlan's tail for the argmax path. A step queued ahead
// (pipeline.go) may hold sequences that ended on the step before: their
// ids are dropped.
func (e *Engine) acceptGreedy(plan *sched.Plan, ids []int32, err error, start time.Time) {
	e.acceptRows(plan, func(row int) sample.Result { return sample.Result{ID: ids[row]} }, err, start)
}

// acceptRows is runPlan's tail when the model chose the tokens (argmax or
// device sampling): res(row) is logit row's token.
func (e *Engine) acceptRows(plan *sched.Plan, res func(row int) sample.Result, err error, start time.Time) {
	if err != nil {
		err = fmt.Errorf("engine: forward: %w", err)
		for _, it := range plan.Items {
			e.finish(e.reqs[it.Seq.ID], FinishError, err, nil)
		}
		e.publish(plan, time.Since(start))
		return
	}
	e.saveSlots(plan)
	now := time.Now()
	row := 0
	for _, it := range plan.Items {
		r := e.reqs[it.Seq.ID]
		if r == nil {
			if it.Logits {
				row++
			}
			if !it.Prefill {
				plan.DecodeTokens -= it.Len // computed, never emitted
			}
			continue
		}
		it.Seq.Computed += it.Len
		if !it.Logits {
			continue
		}
		got := res(row)
		row++
		if got.ID == backend.NonFiniteRow {
			e.finish(r, FinishError, ErrNonFiniteLogits, nil)
			continue
		}
		if got.ID < 0 || int(got.ID) >= e.vocab {
			e.finish(r, FinishError, fmt.Errorf("engine: the model chose token %d outside the vocabulary", got.ID), nil)
			continue
		}
		if c := r.req.Constraint; c != nil { // masked on the device (rowsample.go)
			if err := c.Accept(got.ID); err != nil {
				e.finish(r, FinishError, fmt.Errorf("engine: constraint: %w", err), nil)
				continue
			}
		}
		e.accept(r, got, now)
	}
	e.publish(plan, time.Since(start))
}

// buildBatch lays the plan out as rows: each item's tokens contiguous, at
// their own positions, with the sequence's block table and slot. LogitRows
// follow item order, which is how sampling maps logits back to requests.
func (e *Engine) buildBatch(plan *sched.Plan) *backend.Batch {
	b := &e.batch
	b.Tokens = b.Tokens[:0]
	b.Positions = b.Positions[:0]
	b.Seqs = b.Seqs[:0]
	b.LogitRows = b.LogitRows[:0]
	for _, it := range plan.Items {
		start := len(b.Tokens)
		b.Tokens = append(b.Tokens, it.Seq.Tokens[it.Start:it.Start+it.Len]...)
		for p := it.Start; p < it.Start+it.Len; p++ {
			b.Positions = append(b.Positions, int32(p))
		}
		b.Seqs = append(b.Seqs, backend.SeqSlice{Start: start, Len: it.Len, Blocks: it.Blocks, Slot: it.Slot})
		if it.Logits {
			b.LogitRows = append(b.LogitRows, start+it.Len-1)
		}
	}
	return b
}

// forward runs the model, turning a panic into an error so that one bad
// step fails its own requests instead of the whole server.
func (e *Engine) forward(b *backend.Batch) (logits []float32, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return e.m.Forward(b, e.kvStore)
}

// ErrNonFiniteLogits fails a request whose logits hold NaN or +Inf
// (broken weights, an overflowing kernel): sampling them would emit
// arbitrary tokens with a 200. -Inf is a masked logit, not a failure (the
// backends' Argmax agrees: backend.NonFiniteRow).
var ErrNonFiniteLogits = errors.New("engine: the model produced non-finite logits (NaN or Inf): its weights or its computation are broken")

// finiteRow reports whether no logit is NaN or +Inf: max(v, 0)*0 is 0 for
// a finite v or -Inf and NaN otherwise, so sums tell, without a branch per
// value (a fraction of the sampling pass over the same row).
func finiteRow(l []float32) bool {
	var a0, a1, a2, a3 float32
	i := 0
	for ; i+4 <= len(l); i += 4 {
		v := l[i : i+4 : i+4]
		a0 += max(v[0], 0) * 0
		a1 += max(v[1], 0) * 0
		a2 += max(v[2], 0) * 0
		a3 += max(v[3], 0) * 0
	}
	for ; i < len(l); i++ {
		a0 += max(l[i], 0) * 0
	}
	return a0+a1+a2+a3 == 0
}

// sampleAll samples every job, in parallel when there are several: each
// request has its own sampler, so the results do not depend on the order.
func (e *Engine) sampleAll(jobs []sampleJob) {
	run := func(j *sampleJob) {
		defer func() {
			if p := recover(); p != nil {
				j.err = fmt.Errorf("engine: sampler panic: %v", p)
			}
		}()
		// Before any constraint mask, which writes -Inf on purpose.
		if !finiteRow(j.logits) {
			j.err = ErrNonFiniteLogits
			return
		}
		e.sampleJobRun(j) // constraint.go
	}
	parallelEach(min(e.workers, len(jobs)), len(jobs), func(i int) { run(&jobs[i]) })
}

// parallelEach runs f(0..n-1) on up to workers goroutines.
func parallelEach(workers, n int, f func(i int)) {
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// accept appends a sampled token to its sequence, emits it and ends the
// request when a stop condition holds.
func (e *Engine) accept(r *request, res sample.Result, now time.Time) {
	r.seq.Tokens = append(r.seq.Tokens, res.ID)
	r.generated++
	if r.firstToken.IsZero() {
		r.firstToken = now
	}
	r.lastToken = now
	if !r.req.IgnoreEOS && slices.Contains(r.req.StopIDs, res.ID) {
		e.finish(r, FinishStop, nil, &res)
		return
	}
	// res.Top is freshly allocated by the sampler, so the event may keep it.
	r.stream.push(Event{Token: res.ID, Logprob: res.Logprob, Top: res.Top})
	// The context check is a backstop: Submit already bounds MaxTokens by
	// the context length.
	if r.generated >= r.req.MaxTokens || len(r.seq.Tokens) >= e.maxContext {
		e.finish(r, FinishLength, nil, nil)
	}
}

// finish ends r: frees its KV blocks and slot, emits the terminal event,
// reports it to OnFinish. stop is the sampled stop token, if any.
func (e *Engine) finish(r *request, reason string, err error, stop *sample.Result) {
	if r == nil || e.reqs[r.seq.ID] != r {
		return // already finished: never release a slot twice
	}
	e.sched.Remove(&r.seq)
	delete(e.reqs, r.seq.ID)
	e.mu.Lock()
	e.live--
	e.mu.Unlock()

	t := r.timing(time.Now())
	// Counters, gauges and OnFinish come before the terminal event, so a
	// consumer that has seen Done also sees its request accounted for and
	// its blocks released in Stats.
	e.statsMu.Lock()
	e.stats.Finished++
	switch reason {
	case FinishCancelled:
		e.stats.Cancelled++
	case FinishError:
		e.stats.Errors++
	}
	e.refreshGauges()
	e.statsMu.Unlock()
	if e.cfg.OnFinish != nil {
		e.cfg.OnFinish(t, reason)
	}

	ev := Event{Token: -1, Done: true, FinishReason: reason, Err: err, Timing: t}
	if stop != nil {
		ev.Token, ev.Logprob = stop.ID, stop.Logprob
	}
	r.stream.push(ev)
}

// refreshGauges copies the scheduler's current state into the snapshot.
// The caller holds statsMu.
func (e *Engine) refreshGauges() {
	kv := e.sched.KV()
	s := &e.stats
	s.Running = e.sched.NumRunning()
	s.Waiting = e.sched.NumWaiting()
	s.KVBlocksUsed = kv.UsedBlocks()
	s.KVBlocksCached = kv.CachedBlocks()
	s.KVUsage = kv.Usage()
}

// publish updates the Stats snapshot after a step (plan nil: no step ran,
// only the gauges changed) and calls OnStep.
func (e *Engine) publish(plan *sched.Plan, d time.Duration) {
	if plan != nil {
		e.cost.observe(plan.PrefillTokens, plan.DecodeTokens, d)
	}
	e.statsMu.Lock()
	e.refreshGauges()
	s := &e.stats
	if plan != nil {
		s.Steps++
		s.BatchSize = len(plan.Items)
		s.BatchTokens = plan.Tokens()
		s.PrefillTokens += uint64(plan.PrefillTokens)
		s.DecodeTokens += uint64(plan.DecodeTokens)
		s.Preemptions += uint64(len(plan.Preempted))
		s.PrefixCacheQueries += uint64(plan.PrefixQueryTokens)
		s.PrefixCacheHits += uint64(plan.PrefixHitTokens)
	} else {
		s.BatchSize, s.BatchTokens = 0, 0
	}
	st := StepStats{Running: s.Running, Waiting: s.Waiting, KVUsage: s.KVUsage, Duration: d}
	e.statsMu.Unlock()
	if plan == nil || e.cfg.OnStep == nil {
		return
	}
	st.Seqs = len(plan.Items)
	st.Tokens = plan.Tokens()
	st.PrefillTokens = plan.PrefillTokens
	st.DecodeTokens = plan.DecodeTokens
	st.Admitted = len(plan.Admitted)
	st.Preempted = len(plan.Preempted)
	e.cfg.OnStep(st)
}
