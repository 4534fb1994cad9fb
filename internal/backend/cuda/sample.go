//go:build linux

package cuda

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// Sampling on the device (backend.RowSampler, kernels/sample.cu). A step
// that samples uploads one small buffer (per-row parameters and the
// penalised rows' token histories), runs one block per logit row, and
// copies back the ids and logprobs: 8 + 8*logprobs bytes a row instead of
// the 512 KB of a 128k-vocabulary row of logits.

// The engine finds these by type assertion: a lost method would silently
// turn sampled run-ahead and the prepared constrained step off.
var (
	_ backend.AsyncRowSampler    = (*Backend)(nil)
	_ backend.PreparedRowSampler = (*Backend)(nil)
)

// sampleParamWords is the words of one row's parameters (SAMPLE_PARAMS).
const sampleParamWords = 16

// sampleThreads is sample_rows' block (SAMPLE_THREADS).
const sampleThreads = 512

// Flags of a row's parameters (word 14).
const (
	sampleGreedy    = 1
	samplePenalised = 2
	sampleMasked    = 4 // word 15: where the row's mask starts in the words
)

// sampleWords lays rows out for sample_rows: rows*16 parameter words, then
// 3 words per history entry of the penalised rows (id, output count, a
// slot the kernel keeps the raw logit in), then each masked row's mask as
// 32-bit words (the little-endian halves of Allowed, zero past its end). The knobs are read the way
// sample.New reads them, so the kernel only sees canonical values. os is
// the output's words per row (2 + 2*the most logprobs asked).
func sampleWords(rows []backend.SampleRow, cols int) (words []int32, os int) {
	nh, top := 0, 0
	for i := range rows {
		if penalised(&rows[i]) {
			nh += len(rows[i].History)
		}
		top = max(top, min(max(rows[i].Logprobs, 0), sample.MaxLogprobs, cols))
	}
	words = make([]int32, sampleParamWords*len(rows), sampleParamWords*len(rows)+3*nh)
	f := func(v float32) int32 { return int32(math.Float32bits(v)) }
	for i := range rows {
		r := &rows[i]
		w := words[sampleParamWords*i : sampleParamWords*(i+1)]
		flags := int32(0)
		if !(r.Temperature >= 1e-5) {
			flags |= sampleGreedy
		}
		k := max(r.TopK, 0)
		if k >= cols {
			k = 0
		}
		topP := float32(1)
		if r.TopP > 0 && r.TopP < 1 {
			topP = r.TopP
		}
		minP := float32(0)
		if r.MinP > 0 {
			minP = min(r.MinP, 1)
		}
		rep, pres, freq := penalties(r)
		w[0], w[1], w[2], w[3] = f(r.Temperature), int32(k), f(topP), f(minP)
		w[4], w[5], w[6] = f(rep), f(pres), f(freq)
		w[7], w[8] = int32(uint32(r.Seed)), int32(uint32(r.Seed>>32))
		w[9], w[10] = int32(uint32(r.Counter)), int32(uint32(r.Counter>>32))
		w[11] = int32(min(max(r.Logprobs, 0), sample.MaxLogprobs, cols))
		w[12] = int32((len(words) - sampleParamWords*len(rows)) / 3)
		if penalised(r) {
			flags |= samplePenalised
			w[13] = int32(len(r.History))
			for _, h := range r.History {
				words = append(words, h.ID, h.Output, 0)
			}
		}
		w[14] = flags
	}
	mw := 2 * ((cols + 63) / 64)
	for i := range rows {
		a := rows[i].Allowed
		if a == nil {
			continue
		}
		w := words[sampleParamWords*i : sampleParamWords*(i+1)]
		w[14] |= sampleMasked
		w[15] = int32(len(words))
		for j := range mw / 2 {
			var v uint64
			if j < len(a) {
				v = a[j]
			}
			words = append(words, int32(uint32(v)), int32(uint32(v>>32)))
		}
	}
	return words, 2 + 2*top
}

// penalties are r's penalties as sample.New reads them (off: 1, 0, 0).
func penalties(r *backend.SampleRow) (rep, pres, freq float32) {
	rep = 1
	if r.RepetitionPenalty > 0 && !math.IsInf(float64(r.RepetitionPenalty), 0) {
		rep = r.RepetitionPenalty
	}
	fin := func(v float32) float32 {
		if v != v || math.IsInf(float64(v), 0) {
			return 0
		}
		return v
	}
	return rep, fin(r.PresencePenalty), fin(r.FrequencyPenalty)
}

func penalised(r *backend.SampleRow) bool {
	rep, pres, freq := penalties(r)
	return rep != 1 || pres != 0 || freq != 0
}

// sampleTops is each row's count of top logprobs to return.
func sampleTops(rows []backend.SampleRow, cols int) []int {
	tops := make([]int, len(rows))
	for i := range rows {
		tops[i] = min(max(rows[i].Logprobs, 0), sample.MaxLogprobs, cols)
	}
	return tops
}

// sampleResults reads sample_rows' output (os words a row, tops[i] top
// logprobs in row i).
func sampleResults(out []int32, tops []int, os int) []backend.Sampled {
	res := make([]backend.Sampled, len(tops))
	for i, n := range tops {
		o := out[os*i : os*(i+1)]
		res[i] = backend.Sampled{ID: o[0], Logprob: math.Float32frombits(uint32(o[1]))}
		if o[0] == backend.NonFiniteRow {
			res[i].Logprob = 0
			continue
		}
		if n > 0 {
			res[i].Top = make([]backend.TokenLogprob, n)
			for j := range n {
				res[i].Top[j] = backend.TokenLogprob{ID: o[2+2*j], Logprob: math.Float32frombits(uint32(o[3+2*j]))}
			}
		}
	}
	return res
}

// SampleRows samples each row of x with rows (backend.RowSampler): it
// queues the sampling and waits for it.
func (b *Backend) SampleRows(x backend.Tensor, rows []backend.SampleRow) ([]backend.Sampled, error) {
	return b.SampleRowsAsync(x, rows).Wait()
}

// pendingSamples is a queued sampling (backend.PendingSamples): the copy
// of its output words, read back by sampleResults.
type pendingSamples struct {
	c    *pendingCopy
	tops []int
	os   int
}

func (p pendingSamples) Wait() ([]backend.Sampled, error) {
	words, err := p.c.wait()
	if err != nil {
		return nil, fmt.Errorf("cuda: sampling %d rows: %w", len(p.tops), err)
	}
	return sampleResults(words, p.tops, p.os), nil
}

// SampleRowsAsync queues the sampling of each row of x with rows
// (backend.AsyncRowSampler). The step's recorded launches and the sampling
// kernel go out together, so a decode step that samples is still one
// graph; the parameters travel by an asynchronous copy queued before it,
// and the results come back as an argmax's ids do (queueCopy). The ids
// also land in the feed buffer, where FeedTokens name them.
func (b *Backend) SampleRowsAsync(x backend.Tensor, rows []backend.SampleRow) backend.PendingSamples {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tt(x)
	if len(rows) != t.rows {
		return backend.ReadySamples{Err: fmt.Errorf("cuda: SampleRows got %d parameter rows for %d logit rows", len(rows), t.rows)}
	}
	if t.rows == 0 {
		return backend.ReadySamples{}
	}
	if t.cols == 0 {
		return backend.ReadySamples{Err: fmt.Errorf("cuda: SampleRows of empty rows")}
	}
	words, os := sampleWords(rows, t.cols)
	defer b.bind()()
	out, err := b.sampleLaunch(t, words, os)
	if err != nil {
		b.err = nil // reported here, not again by the next Sync
		return backend.ReadySamples{Err: fmt.Errorf("cuda: sampling %d rows: %w", t.rows, err)}
	}
	p := b.queueCopy(out, t.rows*os)
	if p.err == nil {
		b.feedRows = t.rows
	}
	return pendingSamples{c: p, tops: sampleTops(rows, t.cols), os: os}
}

// LaunchRecorded starts the step recorded so far (backend.PreparedRowSampler):
// a constrained step's forward runs while the host computes its masks, and
// the SampleRows after it launches sample_rows alone.
func (b *Backend) LaunchRecorded() {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	b.flush()
}

// sampleLaunch uploads words and records sample_rows behind the step's
// launches; it returns the output's device address.
func (b *Backend) sampleLaunch(t *Tensor, words []int32, os int) (uintptr, error) {
	if err := b.grow(&b.feed, 4*t.rows); err != nil {
		return 0, err
	}
	// The output first, the parameters last: the addresses the launch
	// names then depend on the row count and logprobs only, not on the
	// history's length, and a repeated step shape replays its graph.
	out, err := b.arenaAlloc(4 * t.rows * os)
	if err != nil {
		return 0, err
	}
	// Nothing queued or recorded names prm (fresh in this step's arena,
	// and the copy is ordered on the stream behind the step before): it
	// may be queued ahead of the launches still being recorded.
	prm, err := b.arenaAllocFresh(4 * len(words))
	if err != nil {
		return 0, err
	}
	in := &b.sampleIn[b.nextSampleIn]
	b.nextSampleIn = (b.nextSampleIn + 1) % len(b.sampleIn)
	if err := b.uploadVia(in, prm, words); err != nil {
		return 0, err
	}
	hist := prm + uintptr(4*sampleParamWords*t.rows)
	b.newLaunch("sample_rows", t.rows, 1, 1, sampleThreads).p(out).p(b.feed.ptr).p(t.ptr).p(prm).p(hist).i(t.cols).i(os)
	return out, b.err
}
