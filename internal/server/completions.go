package server

import (
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// completionRequest is POST /v1/completions.
type completionRequest struct {
	commonFields
	// Prompt is a string, an array of token ids, or a one-element array
	// of either (n=1: one prompt per request).
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
	// Logprobs is the legacy integer: how many alternatives per token
	// (0 returns the chosen tokens' logprobs alone).
	Logprobs *int    `json:"logprobs"`
	Suffix   *string `json:"suffix"`
	BestOf   *int    `json:"best_of"`
}

// prompt tokenizes the prompt field. A text prompt gets the tokenizer's
// special tokens (BOS), as transformers and vLLM add them; token ids are
// used exactly as given. echo is the prompt as text, for echo=true.
func (req *completionRequest) prompt(m *served) (ids []int32, echo string, e *apiError) {
	raw := req.Prompt
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "", badRequest("prompt", "'prompt' is required.")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return m.encodePrompt(text)
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if len(texts) != 1 {
			return nil, "", badRequest("prompt", "Only one prompt per request is supported, got %d.", len(texts))
		}
		return m.encodePrompt(texts[0])
	}
	var toks []int64
	if json.Unmarshal(raw, &toks) != nil {
		var lists [][]int64
		if json.Unmarshal(raw, &lists) != nil {
			return nil, "", badRequest("prompt", "'prompt' must be a string, an array of token ids, or a one-element array of either.")
		}
		if len(lists) != 1 {
			return nil, "", badRequest("prompt", "Only one prompt per request is supported, got %d.", len(lists))
		}
		toks = lists[0]
	}
	if len(toks) == 0 {
		return nil, "", badRequest("prompt", "The prompt has no tokens.")
	}
	ids = make([]int32, len(toks))
	for i, t := range toks {
		if t < 0 || t >= int64(m.vocab) {
			return nil, "", badRequest("prompt", "Token id %d at position %d is outside the vocabulary (0..%d).", t, i, m.vocab-1)
		}
		ids[i] = int32(t)
	}
	if req.Echo {
		echo = m.tok.Decode(ids, true)
	}
	return ids, echo, nil
}

func (m *served) encodePrompt(text string) ([]int32, string, *apiError) {
	if e := m.textTooLong("prompt", text); e != nil {
		return nil, "", e // prompts.go: refused before tokenizing
	}
	ids, err := m.tok.Encode(text, true)
	if err != nil {
		return nil, "", badRequest("prompt", "tokenizing the prompt: %v", err)
	}
	return ids, text, nil
}

// topLogprobs validates the legacy logprobs integer.
func (req *completionRequest) topLogprobs() (want bool, top int, e *apiError) {
	if req.Logprobs == nil {
		return false, 0, nil
	}
	if *req.Logprobs < 0 || *req.Logprobs > sample.MaxLogprobs {
		return false, 0, badRequest("logprobs", "logprobs must be between 0 and %d, got %d.", sample.MaxLogprobs, *req.Logprobs)
	}
	if req.Echo {
		// Prompt logprobs are not computed by the engine.
		return false, 0, badRequest("echo", "echo together with logprobs is not supported.")
	}
	return true, *req.Logprobs, nil
}

type completionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
	Timings *timings           `json:"timings,omitempty"`
}

func (s *Server) handleCompletion(w http.ResponseWriter, r *http.Request) string {
	m := s.model()
	if m == nil {
		return s.reject(w, loadingError())
	}
	var req completionRequest
	if e := readJSON(w, r, s.opts.MaxBodyBytes, &req); e != nil {
		return s.reject(w, e)
	}
	if e := req.check(m); e != nil {
		return s.reject(w, e)
	}
	if req.N != nil && *req.N > 1 {
		return s.reject(w, badRequest("n", "n > 1 is supported on /v1/chat/completions only, got n=%d.", *req.N))
	}
	if req.Suffix != nil && *req.Suffix != "" {
		return s.reject(w, badRequest("suffix", "suffix is not supported."))
	}
	if req.BestOf != nil && *req.BestOf != 1 {
		return s.reject(w, badRequest("best_of", "Only best_of=1 is supported, got %d.", *req.BestOf))
	}
	wantLP, top, e := req.topLogprobs()
	if e != nil {
		return s.reject(w, e)
	}
	prompt, echo, e := req.prompt(m)
	if e != nil {
		return s.reject(w, e)
	}
	greq, e := req.request(m, prompt, "prompt", req.MaxTokens, top)
	if e != nil {
		return s.reject(w, e)
	}
	greq.NeedLogprob = wantLP
	if !req.Echo {
		echo = ""
	}
	id, created := newID("cmpl-"), time.Now().Unix()
	if req.Stream {
		return s.streamCompletion(w, r, m, &req, greq, wantLP, echo, id, created)
	}

	var lps *completionLogprobs
	offset := 0
	if wantLP {
		lps = newCompletionLogprobs()
	}
	g, e := s.generate(r.Context(), m, greq, func(d generate.Delta) error {
		if lps != nil && d.Token >= 0 {
			offset = lps.add(m, d, offset, req.ReturnTokensAsTokenIDs)
		}
		return nil
	})
	if e != nil {
		return s.reject(w, e)
	}
	if g.res.FinishReason == engine.FinishCancelled {
		return outcomeCancelled
	}
	if e := failed(&g.res); e != nil {
		return s.reject(w, e)
	}
	reason := finishReason(&g.res)
	writeJSON(w, http.StatusOK, completion{
		ID: id, Object: "text_completion", Created: created, Model: m.name,
		Choices: []completionChoice{{Text: echo + g.res.Text, Logprobs: lps, FinishReason: &reason}},
		Usage:   &g.usage,
		Timings: &g.timings,
	})
	return reason
}

func (s *Server) streamCompletion(w http.ResponseWriter, r *http.Request, m *served, req *completionRequest, greq generate.Request,
	wantLP bool, echo, id string, created int64) string {
	out := newSSE(w)
	chunk := func(c completionChoice) completion {
		return completion{ID: id, Object: "text_completion", Created: created, Model: m.name, Choices: []completionChoice{c}}
	}
	offset := utf8.RuneCountInString(echo)
	echoed := echo == ""
	sendEcho := func() error {
		if echoed {
			return nil
		}
		echoed = true
		return out.send(chunk(completionChoice{Text: echo}))
	}
	g, e := s.generate(r.Context(), m, greq, func(d generate.Delta) error {
		var lp *completionLogprobs
		if wantLP && d.Token >= 0 {
			lp = newCompletionLogprobs()
			offset = lp.add(m, d, offset, req.ReturnTokensAsTokenIDs)
		}
		if d.Text == "" && lp == nil {
			return nil
		}
		if err := sendEcho(); err != nil {
			return err
		}
		return out.send(chunk(completionChoice{Text: d.Text, Logprobs: lp}))
	})
	if e != nil {
		if out.started {
			out.fail(e)
			return outcomeOf(e)
		}
		return s.reject(w, e)
	}
	if g.res.FinishReason == engine.FinishCancelled {
		return outcomeCancelled
	}
	if e := failed(&g.res); e != nil {
		if !out.started {
			return s.reject(w, e)
		}
		out.fail(e)
		return outcomeError
	}
	reason := finishReason(&g.res)
	last := chunk(completionChoice{FinishReason: &reason})
	last.Timings = &g.timings
	if sendEcho() != nil || out.send(last) != nil {
		return outcomeCancelled
	}
	if req.includeUsage() {
		out.send(completion{ID: id, Object: "text_completion", Created: created, Model: m.name,
			Choices: []completionChoice{}, Usage: &g.usage})
	}
	out.done()
	return reason
}
