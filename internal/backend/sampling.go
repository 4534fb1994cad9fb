package backend

import (
	"math"
	"slices"

	"github.com/mlxcel/mlxcel/internal/sample"
)

// SampleRow is one logit row's sampling request for a RowSampler: the
// knobs of sample.Params (read as sample.New reads them: Temperature below
// 1e-5 is greedy, TopK <= 0 or >= the vocabulary is off, TopP outside
// (0, 1) is off, MinP <= 0 is off, RepetitionPenalty <= 0 or 1 is off),
// without the logit bias, which stays on the host path.
type SampleRow struct {
	Temperature       float32
	TopK              int
	TopP              float32
	MinP              float32
	RepetitionPenalty float32
	PresencePenalty   float32
	FrequencyPenalty  float32
	// Seed and Counter pick the draw: sample.Uniform(Seed, Counter). The
	// engine counts a request's output tokens, so a request samples the
	// same tokens alone or in any batch.
	Seed, Counter uint64
	// Logprobs is how many top alternatives to return (0..20); the chosen
	// token's logprob always comes back.
	Logprobs int
	// History is the request's tokens so far as distinct ids, each with
	// its count in the output (0: seen in the prompt only). Only read when
	// a penalty is on.
	History []TokenCount
	// Allowed, when set, is a constraint's mask (grammar-constrained
	// decoding): bit id%64 of Allowed[id/64] allows token id, ids past it
	// are not allowed. The row's other logits become -Inf before anything
	// else reads them, so logprobs are the constrained distribution's, as
	// on the engine's host path; the sampler leaves them -Inf in the row.
	Allowed []uint64
}

// TokenCount is one distinct token of a request's prompt and output.
type TokenCount struct {
	ID     int32
	Output int32 // times it occurs in the output
}

// TokenLogprob is a token and its raw log-probability.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// Sampled is one row's token. Logprobs are raw (log-softmax of the logits
// before penalties and temperature), as sample.Result's. ID is
// NonFiniteRow for a row holding NaN or +Inf.
type Sampled struct {
	ID      int32
	Logprob float32
	Top     []TokenLogprob
}

// RowSampler is a backend that samples a step's logit rows where they
// are, with per-row parameters, and hands back only the chosen ids and
// the logprobs asked for: a 128k-vocabulary row is 512 KB of float32,
// a token 4 bytes. Its draws follow the canonical rule of
// sample.Sampler.SampleWith (id-order inverse CDF, u = sample.Uniform),
// so it picks what HostSample picks: the same token always for greedy and
// top-k 1, and the same token for the same u otherwise except where
// float rounding moves a boundary.
type RowSampler interface {
	// SampleRows samples row i of logits with rows[i].
	SampleRows(logits Tensor, rows []SampleRow) ([]Sampled, error)
}

// HostSample is SampleRow on the host, through internal/sample: the
// reference every RowSampler agrees with (the CPU backend's SampleRows).
func HostSample(logits []float32, r SampleRow) Sampled {
	for _, v := range logits {
		if !(v <= math.MaxFloat32) { // NaN or +Inf (-Inf is a mask)
			return Sampled{ID: NonFiniteRow}
		}
	}
	if r.Allowed != nil {
		logits = slices.Clone(logits)
		sample.ApplyMask(logits, r.Allowed)
	}
	p := sample.Params{
		Temperature:       r.Temperature,
		TopK:              r.TopK,
		TopP:              r.TopP,
		MinP:              r.MinP,
		RepetitionPenalty: r.RepetitionPenalty,
		PresencePenalty:   r.PresencePenalty,
		FrequencyPenalty:  r.FrequencyPenalty,
		Seed:              &r.Seed,
		Logprobs:          r.Logprobs,
	}
	// The sampler's penalties read a set (prompt ∪ output) and the output
	// counts: every distinct id once as "prompt", and Output times as
	// generated, give exactly those.
	var prompt, gen []int32
	if len(r.History) > 0 {
		prompt = make([]int32, len(r.History))
		for i, h := range r.History {
			prompt[i] = h.ID
			for range max(h.Output, 0) {
				gen = append(gen, h.ID)
			}
		}
	}
	res := sample.New(p, len(logits)).SampleWith(logits, prompt, gen, sample.Uniform(r.Seed, r.Counter))
	out := Sampled{ID: res.ID, Logprob: res.Logprob}
	if len(res.Top) > 0 {
		out.Top = make([]TokenLogprob, len(res.Top))
		for i, t := range res.Top {
			out.Top[i] = TokenLogprob{ID: t.ID, Logprob: t.Logprob}
		}
	}
	return out
}

// PendingSamples is a queued SampleRows whose results are still on their
// way to the host.
type PendingSamples interface {
	// Wait blocks until the results are on the host. It reports the first
	// failure of the queued work, as Sync would.
	Wait() ([]Sampled, error)
}

// ReadySamples is a PendingSamples that is already done (backends that
// sample synchronously).
type ReadySamples struct {
	Rows []Sampled
	Err  error
}

func (r ReadySamples) Wait() ([]Sampled, error) { return r.Rows, r.Err }

// AsyncRowSampler is a backend that queues a sampling without waiting for
// it, as ArgmaxAsync queues an argmax: the sampled ids become the rows
// that FeedTokens of the next steps name, so a sampled decode step can be
// queued before the previous step's tokens reach the host.
type AsyncRowSampler interface {
	AsyncArgmaxer
	RowSampler
	// SampleRowsAsync queues SampleRows(logits, rows). rows is only read
	// during the call.
	SampleRowsAsync(logits Tensor, rows []SampleRow) PendingSamples
}

// PreparedRowSampler is a RowSampler that can start a step's recorded
// work on the device before the step's sampling parameters are known: a
// constrained row's mask depends on the tokens so far only, so the host
// computes it while the device runs the forward, and the SampleRows call
// that follows adds only the sampling.
type PreparedRowSampler interface {
	RowSampler
	// LaunchRecorded starts the work recorded so far without waiting for
	// it. A failure stays for the next SampleRows or Sync to report.
	LaunchRecorded()
}
