package engine

import (
	"fmt"
	"math/rand/v2"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine/sched"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// Sampling where the logits are (backend.RowSampler). When the model's
// backend samples rows itself, a step whose every sampled row needs only
// the knobs it takes (no constraint, no logit bias) runs through
// ForwardSample: the backend applies penalties, temperature, top-k,
// top-p and min-p and returns ids and the logprobs asked for, so a GPU
// copies back a few bytes a row instead of the vocabulary's logits, and
// the host does no per-row pass over them. The draw is
// sample.Uniform(seed, output position): a request samples the same
// tokens alone or in any batch, on any RowSampler (the CPU's and the
// CUDA backend's agree but for float rounding at a boundary).

// rowSampling is a model whose backend samples logit rows (*model.Model).
type rowSampling interface {
	// CanSampleRows reports whether ForwardSample can run.
	CanSampleRows() bool
	// ForwardSample runs one step and samples b.LogitRows with rows.
	ForwardSample(b *backend.Batch, kv backend.KVStore, rows []backend.SampleRow) ([]backend.Sampled, error)
}

// preparedSampling is a model that launches a step's forward before its
// rows are known (*model.Model): prepare computes the constrained rows'
// masks while the device runs the forward.
type preparedSampling interface {
	ForwardSamplePrepared(b *backend.Batch, kv backend.KVStore, prepare func() ([]backend.SampleRow, error)) ([]backend.Sampled, error)
}

// rowSampleable reports whether r's next token can be sampled by the
// backend: the logit bias stays on the host path. A constraint's mask
// travels with the row (SampleRow.Allowed): it depends only on the tokens
// so far, so it is computed while the step's forward runs (or before it,
// on a model without ForwardSamplePrepared) and the logits never come
// back.
func rowSampleable(r *Request) bool {
	return len(r.Params.LogitBias) == 0
}

// trySampleRows runs the step through the model's row sampling when the
// backend samples and every sampled row is rowSampleable; ok is false when
// the logits path must run instead. A constrained row whose mask fails
// has its request ended here with the constraint's error, and its token
// is dropped.
func (e *Engine) trySampleRows(plan *sched.Plan, b *backend.Batch) (res []sample.Result, ok bool, err error) {
	m, can := e.m.(rowSampling)
	if !can || len(b.LogitRows) == 0 || !m.CanSampleRows() {
		return nil, false, nil
	}
	rows := make([]backend.SampleRow, 0, len(b.LogitRows))
	var masked []maskJob
	for _, it := range plan.Items {
		if !it.Logits {
			continue
		}
		r := e.reqs[it.Seq.ID]
		if !rowSampleable(&r.req) {
			return nil, false, nil
		}
		if r.req.Constraint != nil {
			masked = append(masked, maskJob{r: r, row: len(rows)})
		}
		rows = append(rows, r.sampleRow())
	}
	pm, prepared := e.m.(preparedSampling)
	if len(masked) > 0 && !prepared && !e.maskRows(masked, rows) {
		return nil, false, nil // the host path reports the constraint's error
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	var got []backend.Sampled
	if len(masked) > 0 && prepared {
		got, err = pm.ForwardSamplePrepared(b, e.kvStore, func() ([]backend.SampleRow, error) {
			e.maskRows(masked, rows)
			return rows, nil
		})
	} else {
		got, err = m.ForwardSample(b, e.kvStore, rows)
	}
	if err == nil && len(got) != len(rows) {
		err = fmt.Errorf("model returned %d tokens for %d rows", len(got), len(rows))
	}
	if err != nil {
		return nil, true, err
	}
	for _, j := range masked {
		if j.err != nil { // sampled unmasked: never emitted
			e.finish(j.r, FinishError, fmt.Errorf("engine: constraint: %w", j.err), nil)
		}
	}
	return sampledResults(got), true, nil
}

// sampledResults converts a backend's tokens to the sampler's results.
func sampledResults(got []backend.Sampled) []sample.Result {
	res := make([]sample.Result, len(got))
	for i, g := range got {
		res[i] = sample.Result{ID: g.ID, Logprob: g.Logprob}
		if len(g.Top) > 0 {
			res[i].Top = make([]sample.TokenLogprob, len(g.Top))
			for j, t := range g.Top {
				res[i].Top[j] = sample.TokenLogprob{ID: t.ID, Logprob: t.Logprob}
			}
		}
	}
	return res
}

// maskJob is a constrained request's row in a row-sampled step.
type maskJob struct {
	r   *request
	row int
	err error
}

// maskRows writes each constrained row's mask (its request's own buffer)
// into rows[j.row].Allowed, in parallel as sampleAll samples: a grammar's
// mask is a cached copy, but 64 rows of a 128k vocabulary are 1 MB. It
// reports false when a constraint failed (that job's err; its row keeps
// no mask).
func (e *Engine) maskRows(jobs []maskJob, rows []backend.SampleRow) bool {
	words := (e.vocab + 63) / 64
	run := func(j *maskJob) {
		if len(j.r.mask) < words {
			j.r.mask = make([]uint64, words)
		}
		m := j.r.mask[:words]
		if j.err = j.r.req.Constraint.Mask(m); j.err == nil {
			rows[j.row].Allowed = m
		}
	}
	parallelEach(min(e.workers, len(jobs)), len(jobs), func(i int) { run(&jobs[i]) })
	for i := range jobs {
		if jobs[i].err != nil {
			return false
		}
	}
	return true
}

// rowState is what row sampling keeps per request: the seed of its draws
// and, when a penalty is on, its tokens so far as distinct ids with output
// counts, brought up to date incrementally.
type rowState struct {
	seed    uint64
	hist    []backend.TokenCount
	histAt  map[int32]int // id -> index in hist
	histLen int           // tokens of seq.Tokens counted in hist
}

// newRowState draws the seed of a request without one.
func newRowState(p sample.Params) rowState {
	if p.Seed != nil {
		return rowState{seed: *p.Seed}
	}
	return rowState{seed: rand.Uint64()}
}

// penalised reports whether p turns a penalty on (as sample.New reads it).
func penalised(p sample.Params) bool {
	return (p.RepetitionPenalty > 0 && p.RepetitionPenalty != 1) || p.PresencePenalty != 0 || p.FrequencyPenalty != 0
}

// sampleRow is r's next token's request to the backend.
func (r *request) sampleRow() backend.SampleRow {
	p := r.req.Params
	row := backend.SampleRow{
		Temperature:       p.Temperature,
		TopK:              p.TopK,
		TopP:              p.TopP,
		MinP:              p.MinP,
		RepetitionPenalty: p.RepetitionPenalty,
		PresencePenalty:   p.PresencePenalty,
		FrequencyPenalty:  p.FrequencyPenalty,
		Seed:              r.rows.seed,
		Counter:           uint64(len(r.outputIDs())),
		Logprobs:          p.Logprobs,
	}
	if penalised(p) {
		row.History = r.history()
	}
	return row
}

// history brings r's token counts up to date with its tokens and returns
// them. The backend only reads them during the call.
func (r *request) history() []backend.TokenCount {
	s := &r.rows
	if s.histAt == nil {
		s.histAt = map[int32]int{}
	}
	for i := s.histLen; i < len(r.seq.Tokens); i++ {
		id := r.seq.Tokens[i]
		j, ok := s.histAt[id]
		if !ok {
			j = len(s.hist)
			s.histAt[id] = j
			s.hist = append(s.hist, backend.TokenCount{ID: id})
		}
		if i >= r.seq.PromptLen {
			s.hist[j].Output++
		}
	}
	s.histLen = len(r.seq.Tokens)
	return s.hist
}
