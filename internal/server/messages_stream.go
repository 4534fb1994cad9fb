package server

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
)

// anthSSE writes Anthropic's named events ("event: NAME\ndata: {...}").
// As for chat streams, headers go out with the first event, so a request
// the engine refuses still gets its status.
type anthSSE struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (s *anthSSE) send(event string, v any) error {
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := s.w.Write([]byte("event: " + event + "\ndata: " + string(b) + "\n\n")); err != nil {
		return err
	}
	return s.rc.Flush()
}

// anthBlocksOut tracks the content blocks of a streamed message: one is
// open at a time; a piece of another kind closes it and opens the next.
type anthBlocksOut struct {
	out   *anthSSE
	j     *chatJob
	index int    // of the open block, -1 before the first
	kind  string // "thinking", "text", "tool_use"
	call  int    // the tool call index of an open tool_use block
	begun bool   // message_start sent
}

func (b *anthBlocksOut) start() error {
	if b.begun {
		return nil
	}
	b.begun = true
	msg := anthResponse{ID: b.j.id, Type: "message", Role: "assistant", Model: b.j.m.name, Content: []anthContent{},
		Usage: anthUsage{InputTokens: len(b.j.greq.Prompt)}}
	return b.out.send("message_start", map[string]any{"type": "message_start", "message": msg})
}

// open closes the open block and starts a new one.
func (b *anthBlocksOut) open(kind string, block anthContent, call int) error {
	if err := b.closeBlock(); err != nil {
		return err
	}
	b.index++
	b.kind, b.call = kind, call
	return b.out.send("content_block_start", map[string]any{"type": "content_block_start", "index": b.index, "content_block": block})
}

func (b *anthBlocksOut) closeBlock() error {
	if b.kind == "" {
		return nil
	}
	if b.kind == "thinking" {
		// Local thoughts carry no signature; the SDKs expect the event.
		if err := b.delta(map[string]any{"type": "signature_delta", "signature": ""}); err != nil {
			return err
		}
	}
	b.kind = ""
	return b.out.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": b.index})
}

func (b *anthBlocksOut) delta(d map[string]any) error {
	return b.out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": b.index, "delta": d})
}

// piece sends what an answer made final.
func (b *anthBlocksOut) piece(p answerPiece, a *answer) error {
	if p.empty() {
		return nil
	}
	if err := b.start(); err != nil {
		return err
	}
	empty := ""
	if p.reasoning != "" {
		if b.kind != "thinking" {
			if err := b.open("thinking", anthContent{Type: "thinking", Thinking: &empty, Signature: &empty}, 0); err != nil {
				return err
			}
		}
		if err := b.delta(map[string]any{"type": "thinking_delta", "thinking": p.reasoning}); err != nil {
			return err
		}
	}
	if p.content != "" {
		if b.kind != "text" {
			if err := b.open("text", anthContent{Type: "text", Text: &empty}, 0); err != nil {
				return err
			}
		}
		if err := b.delta(map[string]any{"type": "text_delta", "text": p.content}); err != nil {
			return err
		}
	}
	for _, c := range p.calls {
		if c.ID != "" {
			id := toolUseID(a.calls[c.Index].ID)
			if err := b.open("tool_use", anthContent{Type: "tool_use", ID: id, Name: c.Function.Name, Input: json.RawMessage("{}")}, c.Index); err != nil {
				return err
			}
		}
		if c.Function.Arguments != "" {
			if err := b.delta(map[string]any{"type": "input_json_delta", "partial_json": c.Function.Arguments}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Server) streamMessages(w http.ResponseWriter, r *http.Request, j *chatJob) string {
	out := &anthSSE{w: w, rc: http.NewResponseController(w)}
	b := &anthBlocksOut{out: out, j: j, index: -1}
	a := j.newAnswer()
	var mu sync.Mutex
	gens, e := s.runChoices(r.Context(), j, func(_ int, d generate.Delta) error {
		mu.Lock()
		defer mu.Unlock()
		return b.piece(a.push(d.Text), a)
	}, nil)
	fail := func(e *apiError) string {
		if !out.started {
			return s.rejectAnth(w, e)
		}
		typ := "api_error"
		if e.status == 503 {
			typ = "overloaded_error"
		}
		out.send("error", map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": e.msg}})
		return outcomeOf(e)
	}
	if e != nil {
		return fail(e)
	}
	g := gens[0]
	if g.res.FinishReason == engine.FinishCancelled {
		return outcomeCancelled
	}
	if e := failed(&g.res); e != nil {
		return fail(e)
	}
	if b.start() != nil || b.piece(a.close(), a) != nil {
		return outcomeCancelled
	}
	if b.index < 0 {
		// An empty answer is still one (empty) text block.
		empty := ""
		if b.open("text", anthContent{Type: "text", Text: &empty}, 0) != nil {
			return outcomeCancelled
		}
	}
	reason, seq := stopReason(a, &g.res)
	if b.closeBlock() != nil ||
		out.send("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq},
			"usage": map[string]int{"output_tokens": g.usage.CompletionTokens}}) != nil ||
		out.send("message_stop", map[string]string{"type": "message_stop"}) != nil {
		return outcomeCancelled
	}
	return reason
}
