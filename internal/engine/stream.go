package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mlxcel/mlxcel/internal/engine/sched"
	"github.com/mlxcel/mlxcel/internal/kvcache"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// Finish reasons of the terminal Event.
const (
	FinishStop      = "stop"      // a stop id was sampled
	FinishLength    = "length"    // max tokens or the context length reached
	FinishCancelled = "cancelled" // Stream.Cancel or the Submit context ended
	FinishError     = "error"     // model failure or engine stopped; see Err
)

// Event is one token of a stream, or its end.
//
// Token events have Done false and carry the token, its logprob and the
// requested top alternatives. The last event of a stream has Done true and
// carries no new text: FinishReason, Err and Timing. When FinishReason is
// FinishStop, Token and Logprob are the stop id that ended it (not meant to
// be rendered; it is counted in Timing.GeneratedTokens); otherwise Token is
// -1.
type Event struct {
	Token        int32
	Logprob      float32
	Top          []sample.TokenLogprob
	Done         bool
	FinishReason string
	Err          error
	Timing       Timing
}

// Timing describes a finished request, filled in the terminal event and
// passed to Config.OnFinish.
type Timing struct {
	Queued  time.Duration // Submit until first admitted to the batch
	Prefill time.Duration // first admitted until first token (prompt processing)
	TTFT    time.Duration // Submit until first token
	Decode  time.Duration // first token until last token
	Total   time.Duration // Submit until finished

	PromptTokS float64 // prompt tokens / Prefill
	DecodeTokS float64 // tokens after the first / Decode

	PromptTokens int
	// CachedTokens is how many prompt tokens came from the prefix cache
	// at the request's first admission (OpenAI's
	// prompt_tokens_details.cached_tokens).
	CachedTokens    int
	GeneratedTokens int
	Preemptions     int // times the request lost its KV and was recomputed
}

// Stream delivers one request's events.
//
// Channel policy: the engine never blocks on a consumer. Events go to an
// unbounded per-stream queue (memory grows only with tokens the consumer
// has not read yet, at most MaxTokens+1 events) and a small per-stream
// goroutine moves them to the Events channel. A fixed buffer sized to
// MaxTokens would allocate up front for every request, and a dropping ring
// would lose tokens.
//
// The channel is closed after the terminal event. After Cancel (or when the
// Submit context ends) it is closed promptly instead, and events not yet
// received, the terminal one included, may be dropped: a consumer that
// cancels is expected to stop reading. A consumer that neither drains the
// channel nor cancels keeps that goroutine alive.
type Stream struct {
	ch     chan Event
	ctx    context.Context
	cancel context.CancelFunc

	// finishRequested is set by Finish: the caller decided the output is
	// complete (a stop string matched).
	finishRequested atomic.Bool

	mu    sync.Mutex
	queue []Event
	ended bool
	kick  chan struct{} // cap 1: "queue has events"
}

// Events is the stream's event channel.
func (s *Stream) Events() <-chan Event { return s.ch }

// Cancel ends the request: the engine frees its slot and KV blocks within
// the next step. Safe to call more than once and after the end.
func (s *Stream) Cancel() { s.cancel() }

// Finish ends the request as complete (finish reason "stop"), for stop
// conditions the caller detects itself, such as a stop string. Unlike
// Cancel, the stream still delivers a terminal event with the request's
// Timing; tokens generated before the engine noticed (at most a step's
// worth) may arrive first and are not part of the output.
func (s *Stream) Finish() { s.finishRequested.Store(true) }

func newStream(ctx context.Context) *Stream {
	s := &Stream{
		// A few events of slack lets a consumer that is a little behind
		// take tokens without a goroutine hand-off each time.
		ch:   make(chan Event, 8),
		kick: make(chan struct{}, 1),
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	go s.pump()
	return s
}

// push queues ev; called by the engine goroutine, never blocks.
func (s *Stream) push(ev Event) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, ev)
	s.ended = ev.Done
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// pump moves queued events to the channel until the terminal event is
// delivered or the stream is cancelled.
func (s *Stream) pump() {
	// cancel releases the context's resources once nothing needs it; the
	// engine only looks at the context while the request is live, which
	// ends before the terminal event is queued.
	defer s.cancel()
	defer close(s.ch)
	var batch []Event
	for {
		s.mu.Lock()
		batch, s.queue = s.queue, batch[:0]
		ended := s.ended
		s.mu.Unlock()
		for i := range batch {
			select {
			case s.ch <- batch[i]:
			case <-s.ctx.Done():
				return
			}
			batch[i] = Event{} // drop references for the GC
		}
		if ended {
			// ended was read together with the queue, so batch held the
			// terminal event and it has been delivered.
			return
		}
		select {
		case <-s.kick:
		case <-s.ctx.Done():
			return
		}
	}
}

// request is the engine's state for one submitted request. Everything but
// stream is owned by the engine goroutine.
type request struct {
	seq     sched.Seq
	req     Request
	stream  *Stream
	sampler Sampler
	rows    rowState // row sampling's seed and token counts (rowsample.go)
	mask    []uint64 // the constraint's scratch (constraint.go)

	generated    int
	cachedTokens int // prompt tokens found in the prefix cache at first admission
	submitted    time.Time
	admitted     time.Time // first admission
	firstToken   time.Time
	lastToken    time.Time
}

func newRequest(ctx context.Context, id kvcache.SeqID, r Request, s Sampler) *request {
	// The request keeps its own copies: the caller may reuse its slices.
	r.Prompt = slices.Clone(r.Prompt)
	r.StopIDs = slices.Clone(r.StopIDs)
	return &request{
		seq:       sched.Seq{ID: id, Tokens: slices.Clone(r.Prompt), PromptLen: len(r.Prompt)},
		req:       r,
		stream:    newStream(ctx),
		sampler:   s,
		rows:      newRowState(r.Params),
		submitted: time.Now(),
	}
}

func (r *request) prompt() []int32    { return r.seq.Tokens[:r.seq.PromptLen] }
func (r *request) outputIDs() []int32 { return r.seq.Tokens[r.seq.PromptLen:] }

// timing summarises the request at its end.
func (r *request) timing(now time.Time) Timing {
	t := Timing{
		Total:           now.Sub(r.submitted),
		PromptTokens:    r.seq.PromptLen,
		CachedTokens:    r.cachedTokens,
		GeneratedTokens: r.generated,
		Preemptions:     r.seq.Preemptions,
	}
	if r.admitted.IsZero() {
		t.Queued = t.Total
		return t
	}
	t.Queued = r.admitted.Sub(r.submitted)
	if r.firstToken.IsZero() {
		return t
	}
	t.Prefill = r.firstToken.Sub(r.admitted)
	t.TTFT = r.firstToken.Sub(r.submitted)
	t.Decode = r.lastToken.Sub(r.firstToken)
	if s := t.Prefill.Seconds(); s > 0 {
		t.PromptTokS = float64(t.PromptTokens) / s
	}
	if s := t.Decode.Seconds(); s > 0 && r.generated > 1 {
		t.DecodeTokS = float64(r.generated-1) / s
	}
	return t
}
