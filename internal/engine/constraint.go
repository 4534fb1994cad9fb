package engine

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/sample"
)

// Constraint restricts the tokens one sequence may sample next:
// grammar-constrained decoding (*grammar.Matcher satisfies it). Each
// request has its own; the engine calls it from one goroutine at a time.
type Constraint interface {
	// Mask writes the tokens allowed next as a bitmask over the
	// vocabulary: bit id%64 of allowed[id/64]. An error ends the request.
	Mask(allowed []uint64) error
	// Accept advances past the sampled token.
	Accept(id int32) error
}

// argmaxOnly reports whether a request's next token is exactly the argmax
// of the raw logits, so the step may run through the model's argmax path
// that returns only ids. A constrained request needs its logits.
func argmaxOnly(r *Request) bool {
	return r.Constraint == nil && !r.NeedLogprob && pureGreedy(r.Params)
}

// sampleJobRun samples one job: the constraint's mask applied to the
// logits row (the engine's own buffer) first, the constraint advanced
// after.
func (e *Engine) sampleJobRun(j *sampleJob) {
	c := j.r.req.Constraint
	if c != nil {
		words := (len(j.logits) + 63) / 64
		if len(j.r.mask) < words {
			j.r.mask = make([]uint64, words)
		}
		if err := c.Mask(j.r.mask[:words]); err != nil {
			j.err = fmt.Errorf("engine: constraint: %w", err)
			return
		}
		sample.ApplyMask(j.logits, j.r.mask[:words])
	}
	u := sample.Uniform(j.r.rows.seed, uint64(len(j.r.outputIDs())))
	j.res = j.r.sampler.SampleWith(j.logits, j.r.prompt(), j.r.outputIDs(), u)
	if j.res.ID < 0 || int(j.res.ID) >= e.vocab {
		j.err = fmt.Errorf("engine: sampler returned token %d outside the vocabulary", j.res.ID)
		return
	}
	if c != nil {
		if err := c.Accept(j.res.ID); err != nil {
			j.err = fmt.Errorf("engine: constraint: %w", err)
		}
	}
}
