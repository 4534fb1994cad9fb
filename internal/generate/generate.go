// Package generate turns an engine's token stream into text: incremental
// detokenization, stop strings matched across token boundaries, and the
// bookkeeping the CLI and the server share.
package generate

import (
	"context"
	"strings"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// Detokenizer turns ids into final text incrementally (the tokenizer's
// stream decoder).
type Detokenizer interface {
	Add(id int32) string
	Flush() string
}

// Request is an engine request plus text-level stop conditions.
type Request struct {
	engine.Request
	// Stop strings end generation; the matched text is not returned.
	Stop []string
}

// Delta is one step of output: a token and the text that became final
// with it (often the token's text, sometimes empty while a multi-byte
// character or a possible stop string is pending).
type Delta struct {
	Text    string
	Token   int32
	Logprob float32
	Top     []sample.TokenLogprob
}

// Result summarises a finished generation.
type Result struct {
	Text         string
	Tokens       []int32
	Logprobs     []float32
	FinishReason string // stop, length, cancelled, error
	// StopString is the stop string that ended generation ("" when none
	// did), for APIs that report it (Anthropic's stop_sequence).
	StopString string
	Timing     engine.Timing
	Err        error
}

// Submitter is the part of the engine generation needs.
type Submitter interface {
	Submit(ctx context.Context, r engine.Request) (*engine.Stream, error)
}

// Run submits r and calls emit for every delta until the request ends. An
// error from emit (a client gone) cancels the request. The returned error
// is a submission error (queue full, prompt too long); failures during
// generation are in Result.Err.
func Run(ctx context.Context, eng Submitter, det Detokenizer, r Request, emit func(Delta) error) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := eng.Submit(ctx, r.Request)
	if err != nil {
		return Result{}, err
	}
	defer st.Cancel()
	var res Result
	var text strings.Builder
	stops := &stopMatcher{stops: r.Stop}
	send := func(d Delta) bool {
		text.WriteString(d.Text)
		if emit != nil {
			if err := emit(d); err != nil {
				res.FinishReason, res.Err = engine.FinishCancelled, err
				return false
			}
		}
		return true
	}
	stopped := false
	for ev := range st.Events() {
		if stopped && !ev.Done {
			continue
		}
		if ev.Done && stopped {
			res.Timing, res.FinishReason, res.Err = ev.Timing, engine.FinishStop, ev.Err
			break
		}
		if ev.Done {
			res.Timing = ev.Timing
			res.FinishReason, res.Err = ev.FinishReason, ev.Err
			// The stop id itself never reached the detokenizer; text still
			// pending (an incomplete character, a possible stop prefix)
			// is final now.
			tail, hit := stops.push(det.Flush())
			if hit {
				res.FinishReason = engine.FinishStop
			} else {
				tail += stops.flush()
			}
			if tail != "" {
				send(Delta{Text: tail, Token: -1})
			}
			break
		}
		res.Tokens = append(res.Tokens, ev.Token)
		res.Logprobs = append(res.Logprobs, ev.Logprob)
		out, hit := stops.push(det.Add(ev.Token))
		if !send(Delta{Text: out, Token: ev.Token, Logprob: ev.Logprob, Top: ev.Top}) {
			break
		}
		if hit {
			// Let the engine end the request as "stop" and report its
			// timing; tokens it made meanwhile are not output.
			st.Finish()
			stopped = true
		}
	}
	res.Text = text.String()
	res.StopString = stops.matched
	return res, nil
}

// stopMatcher holds back text that may be the start of a stop string, so
// a stop string split over several tokens is still caught and never
// partially shown.
type stopMatcher struct {
	stops   []string
	pending string
	done    bool
	matched string // the stop string found
}

// push adds text and returns what is safe to emit; hit reports that a stop
// string was found (the text before it is returned, the rest dropped).
func (s *stopMatcher) push(t string) (out string, hit bool) {
	if s.done {
		return "", true
	}
	s.pending += t
	if len(s.stops) == 0 {
		out, s.pending = s.pending, ""
		return out, false
	}
	first := -1
	for _, st := range s.stops {
		if st == "" {
			continue
		}
		if i := strings.Index(s.pending, st); i >= 0 && (first < 0 || i < first) {
			first, s.matched = i, st
		}
	}
	if first >= 0 {
		out = s.pending[:first]
		s.pending, s.done = "", true
		return out, true
	}
	keep := 0
	for _, st := range s.stops {
		for k := min(len(st)-1, len(s.pending)); k > keep; k-- {
			if strings.HasSuffix(s.pending, st[:k]) {
				keep = k
				break
			}
		}
	}
	out = s.pending[:len(s.pending)-keep]
	s.pending = s.pending[len(s.pending)-keep:]
	return out, false
}

// flush returns held-back text at the end of the stream.
func (s *stopMatcher) flush() string {
	out := s.pending
	s.pending = ""
	return out
}
