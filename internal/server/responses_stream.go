package server

import (
	"net/http"
	"strings"
	"sync"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
)

// respStreamer writes a Responses stream: response.created, then per
// output item its added / delta / done events, then response.completed
// (or response.incomplete), every event numbered.
type respStreamer struct {
	out   *anthSSE // named events, the same wire form as Anthropic's
	o     *respObject
	a     *answer
	seq   int
	begun bool
	items []respItem
	cur   *respItem // the open item
	text  strings.Builder
}

func (r *respStreamer) send(typ string, fields map[string]any) error {
	fields["type"] = typ
	fields["sequence_number"] = r.seq
	r.seq++
	return r.out.send(typ, fields)
}

func (r *respStreamer) start() error {
	if r.begun {
		return nil
	}
	r.begun = true
	if err := r.send("response.created", map[string]any{"response": r.o}); err != nil {
		return err
	}
	return r.send("response.in_progress", map[string]any{"response": r.o})
}

func (r *respStreamer) index() int { return len(r.items) }

// open closes the open item and starts one of kind.
func (r *respStreamer) open(it respItem) error {
	if err := r.closeItem(); err != nil {
		return err
	}
	r.cur = &it
	r.text.Reset()
	added := it
	added.Status = "in_progress"
	added.Content = nil
	if it.Type == "message" || it.Type == "reasoning" {
		added.Content = []respContent{}
	}
	if err := r.send("response.output_item.added", map[string]any{"output_index": r.index(), "item": added}); err != nil {
		return err
	}
	if part := r.part(""); part != nil {
		return r.send("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": r.index(),
			"content_index": 0, "part": part})
	}
	return nil
}

// part is the open item's content part holding text (nil for calls).
func (r *respStreamer) part(text string) *respContent {
	switch r.cur.Type {
	case "message":
		return &respContent{Type: "output_text", Text: text, Annotations: []any{}}
	case "reasoning":
		return &respContent{Type: "reasoning_text", Text: text}
	}
	return nil
}

func (r *respStreamer) delta(d string) error {
	r.text.WriteString(d)
	f := map[string]any{"item_id": r.cur.ID, "output_index": r.index(), "delta": d}
	switch r.cur.Type {
	case "message":
		f["content_index"], f["logprobs"] = 0, []any{}
		return r.send("response.output_text.delta", f)
	case "reasoning":
		f["content_index"] = 0
		return r.send("response.reasoning_text.delta", f)
	}
	return r.send("response.function_call_arguments.delta", f)
}

func (r *respStreamer) closeItem() error {
	it := r.cur
	if it == nil {
		return nil
	}
	r.cur = nil
	text := r.text.String()
	base := map[string]any{"item_id": it.ID, "output_index": r.index()}
	with := func(kv ...any) map[string]any {
		f := map[string]any{}
		for k, v := range base {
			f[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			f[kv[i].(string)] = kv[i+1]
		}
		return f
	}
	var err error
	switch it.Type {
	case "message":
		err = r.send("response.output_text.done", with("content_index", 0, "text", text, "logprobs", []any{}))
	case "reasoning":
		err = r.send("response.reasoning_text.done", with("content_index", 0, "text", text))
	default:
		err = r.send("response.function_call_arguments.done", with("name", it.Name, "arguments", text))
	}
	if err != nil {
		return err
	}
	it.Status = "completed"
	if it.Type == "function_call" {
		it.Arguments = &text
	} else {
		r.cur = it
		part := r.part(text)
		r.cur = nil
		it.Content = []respContent{*part}
		if it.Type == "reasoning" {
			it.Status = ""
		}
		if err := r.send("response.content_part.done", with("content_index", 0, "part", part)); err != nil {
			return err
		}
	}
	if err := r.send("response.output_item.done", map[string]any{"output_index": r.index(), "item": it}); err != nil {
		return err
	}
	r.items = append(r.items, *it)
	return nil
}

// piece sends what an answer made final.
func (r *respStreamer) piece(p answerPiece) error {
	if p.empty() {
		return nil
	}
	if err := r.start(); err != nil {
		return err
	}
	if p.reasoning != "" {
		if r.cur == nil || r.cur.Type != "reasoning" {
			if err := r.open(respItem{Type: "reasoning", ID: newID("rs_"), Summary: []respContent{}}); err != nil {
				return err
			}
		}
		if err := r.delta(p.reasoning); err != nil {
			return err
		}
	}
	if p.content != "" {
		if r.cur == nil || r.cur.Type != "message" {
			if err := r.open(respItem{Type: "message", ID: newID("msg_"), Role: "assistant"}); err != nil {
				return err
			}
		}
		if err := r.delta(p.content); err != nil {
			return err
		}
	}
	for _, c := range p.calls {
		if c.ID != "" {
			empty := ""
			it := respItem{Type: "function_call", ID: "fc_" + strings.TrimPrefix(c.ID, "call_"), CallID: c.ID,
				Name: c.Function.Name, Arguments: &empty}
			if err := r.open(it); err != nil {
				return err
			}
		}
		if c.Function.Arguments != "" {
			if err := r.delta(c.Function.Arguments); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, rr *responsesRequest, req *chatRequest, j *chatJob) string {
	rs := &respStreamer{out: &anthSSE{w: w, rc: http.NewResponseController(w)}, o: newRespObject(j, rr), a: j.newAnswer()}
	var mu sync.Mutex
	gens, e := s.runChoices(r.Context(), j, func(_ int, d generate.Delta) error {
		mu.Lock()
		defer mu.Unlock()
		return rs.piece(rs.a.push(d.Text))
	}, nil)
	fail := func(e *apiError) string {
		if !rs.out.started {
			return s.reject(w, e)
		}
		rs.o.Status = "failed"
		rs.o.Error = map[string]string{"code": "server_error", "message": e.msg}
		rs.send("response.failed", map[string]any{"response": rs.o})
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
	if rs.start() != nil || rs.piece(rs.a.close()) != nil {
		return outcomeCancelled
	}
	if len(rs.items) == 0 && rs.cur == nil {
		// An empty answer is still one (empty) message.
		if rs.open(respItem{Type: "message", ID: newID("msg_"), Role: "assistant"}) != nil {
			return outcomeCancelled
		}
	}
	if rs.closeItem() != nil {
		return outcomeCancelled
	}
	rs.o.Output = rs.items
	rs.o.finish(g)
	s.storeResponse(j.m, rr, req, rs.a, rs.o)
	event := "response.completed"
	if rs.o.Status == "incomplete" {
		event = "response.incomplete"
	}
	if rs.send(event, map[string]any{"response": rs.o}) != nil {
		return outcomeCancelled
	}
	return rs.a.finish(finishReason(&g.res))
}
