package server

import (
	"context"
	"errors"
	"time"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
)

// usage is the OpenAI usage object.
type usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// promptTokensDetails is OpenAI's breakdown of the prompt: cached_tokens
// are those served from the prefix cache.
type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// timings is llama-server's per-request timing object, plus ttft_ms and
// queue_ms. predicted_per_second is (predicted_n-1)/predicted_ms: the
// first token's time belongs to the prompt, so this is the decode rate
// mlxcel_request_decode_tok_s records too.
type timings struct {
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
	TTFTMS              float64 `json:"ttft_ms"`
	QueueMS             float64 `json:"queue_ms"`
}

// generation is one finished request.
type generation struct {
	res     generate.Result
	usage   usage
	timings timings
}

// generate runs req and calls emit per delta. A submission failure comes
// back as an *apiError (nothing was emitted); failures after that are in
// the result's FinishReason and Err.
func (s *Server) generate(ctx context.Context, m *served, req generate.Request, emit func(generate.Delta) error) (*generation, *apiError) {
	// The server keeps its own clock too: when a stop string ends a
	// request, generate.Run returns before the engine's terminal event,
	// so the engine's Timing is not in the result (see fillTimings).
	start := time.Now()
	var first, last time.Time
	res, err := generate.Run(ctx, m.eng, m.primedDecoder(req.Prompt), req, func(d generate.Delta) error {
		if d.Token >= 0 {
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			last = now
		}
		if emit == nil {
			return nil
		}
		return emit(d)
	})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, &apiError{status: 499, typ: typeInvalid, msg: "client closed the request"}
		}
		return nil, submitError(err, m.eng.MaxContext())
	}
	if errors.Is(res.Err, engine.ErrNonFiniteLogits) {
		s.metrics.nonFinite.Inc()
	}
	if res.FinishReason == "" || ctx.Err() != nil {
		// The stream closed without its terminal event: the request
		// context ended (the client went away) and the engine dropped it.
		res.FinishReason = engine.FinishCancelled
	}
	g := &generation{res: res}
	g.fillTimings(len(req.Prompt), start, first, last)
	return g, nil
}

// primedDecoder is a stream decoder that has seen the end of the prompt.
// A fresh decoder treats the first generated token as the start of the
// text, and decoders such as SentencePiece's strip the leading space
// there: "there was a" would continue "little" instead of " little".
// Feeding the last prompt tokens first (their text discarded) decodes
// the output as it reads after the prompt, as vLLM's detokenizer does.
func (m *served) primedDecoder(prompt []int32) generate.Detokenizer {
	det := m.tok.NewStreamDecoder(!m.agent.keepSpecial) // markup the parsers read may be special tokens
	for _, id := range prompt[max(0, len(prompt)-primeTokens):] {
		det.Add(id)
	}
	return det
}

// primeTokens is how many prompt tokens prime the decoder: enough to get
// past any start-of-text state.
const primeTokens = 8

// fillTimings derives usage and timings from the engine's Timing, or from
// the server's clock when the engine's is missing (stop strings; the
// prompt time then includes any queueing, as queue time is unknown).
func (g *generation) fillTimings(promptN int, start, first, last time.Time) {
	t := g.res.Timing
	n := t.GeneratedTokens
	if t.Total == 0 {
		// No terminal event: rebuild from the server's view.
		n = len(g.res.Tokens)
		t = engine.Timing{PromptTokens: promptN, GeneratedTokens: n}
		if !first.IsZero() {
			t.TTFT = first.Sub(start)
			t.Prefill = t.TTFT
			t.Decode = last.Sub(first)
		}
	}
	g.usage = usage{PromptTokens: promptN, CompletionTokens: n, TotalTokens: promptN + n,
		PromptTokensDetails: &promptTokensDetails{CachedTokens: t.CachedTokens}}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	tm := timings{
		PromptN:     promptN,
		PromptMS:    ms(t.Prefill),
		PredictedN:  n,
		PredictedMS: ms(t.Decode),
		TTFTMS:      ms(t.TTFT),
		QueueMS:     ms(t.Queued),
	}
	if tm.PromptMS > 0 {
		tm.PromptPerTokenMS = tm.PromptMS / float64(promptN)
		tm.PromptPerSecond = float64(promptN) / tm.PromptMS * 1e3
	}
	if tm.PredictedMS > 0 && n > 1 {
		tm.PredictedPerTokenMS = tm.PredictedMS / float64(n-1)
		tm.PredictedPerSecond = float64(n-1) / tm.PredictedMS * 1e3
	}
	g.timings = tm
}

// finishReason is the OpenAI finish_reason of a result; cancelled and
// error results never reach a client as a finish reason.
func finishReason(r *generate.Result) string {
	if r.FinishReason == engine.FinishLength {
		return "length"
	}
	return "stop"
}

// failed reports a generation that ended in an engine error, as the 500
// (or stream error event) the client gets.
func failed(r *generate.Result) *apiError {
	if r.FinishReason != engine.FinishError {
		return nil
	}
	if errors.Is(r.Err, engine.ErrStopped) {
		return &apiError{status: 503, typ: typeUnavailable, code: "shutting_down", msg: "The server is shutting down."}
	}
	return serverError("generation failed: %v", r.Err)
}
