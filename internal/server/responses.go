package server

import (
	"container/list"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
)

// The OpenAI Responses API (POST /v1/responses, GET /v1/responses/{id}).
// As for /v1/messages, a request becomes the chat request it means
// (instructions as the system turn, function_call items as assistant tool
// calls, function_call_output items as tool turns, reasoning items as
// reasoning_content) and runs through the chat job and parsers; the
// answer comes back as output items. previous_response_id continues a
// conversation from a bounded in-memory store.

type responsesRequest struct {
	Model              string                    `json:"model"`
	Input              json.RawMessage           `json:"input"`
	Instructions       *string                   `json:"instructions"`
	Tools              []responsesTool           `json:"tools"`
	ToolChoice         json.RawMessage           `json:"tool_choice"`
	ParallelToolCalls  *bool                     `json:"parallel_tool_calls"`
	MaxOutputTokens    *int                      `json:"max_output_tokens"`
	Temperature        *float64                  `json:"temperature"`
	TopP               *float64                  `json:"top_p"`
	Stream             bool                      `json:"stream"`
	PreviousResponseID string                    `json:"previous_response_id"`
	Store              *bool                     `json:"store"`
	Text               *responsesText            `json:"text"`
	Reasoning          *struct{ Effort *string } `json:"reasoning"`
	Metadata           map[string]string         `json:"metadata"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

type responsesText struct {
	Format *struct {
		Type   string          `json:"type"`
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"format"`
}

type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	Summary   []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// chatRequest translates the request onto history: the stored
// conversation of previous_response_id, then the new input.
func (r *responsesRequest) chatRequest(history []chatMessageIn) (*chatRequest, *apiError) {
	req := &chatRequest{}
	req.Model, req.Stream, req.Temperature, req.TopP = r.Model, r.Stream, r.Temperature, r.TopP
	req.MaxCompletionTokens, req.ParallelToolCalls, req.ToolChoice = r.MaxOutputTokens, r.ParallelToolCalls, r.ToolChoice
	if r.Instructions != nil && *r.Instructions != "" {
		req.Messages = append(req.Messages, textMessage("system", *r.Instructions))
	}
	req.Messages = append(req.Messages, history...)
	input, e := responsesInput(r.Input)
	if e != nil {
		return nil, e
	}
	req.Messages = append(req.Messages, input...)
	if e := r.tools(req); e != nil {
		return nil, e
	}
	if r.Reasoning != nil && r.Reasoning.Effort != nil {
		req.ReasoningEffort = r.Reasoning.Effort
	}
	if r.Text != nil && r.Text.Format != nil {
		f := r.Text.Format
		rf := map[string]any{"type": f.Type}
		if f.Type == "json_schema" {
			rf["json_schema"] = map[string]any{"name": f.Name, "schema": f.Schema, "strict": f.Strict}
		}
		req.ResponseFormat, _ = json.Marshal(rf)
	}
	return req, nil
}

// responsesInput reads "input": a string (one user turn) or items.
func responsesInput(raw json.RawMessage) ([]chatMessageIn, *apiError) {
	if isNull(raw) {
		return nil, badRequest("input", "'input' is required.")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []chatMessageIn{textMessage("user", s)}, nil
	}
	var items []responsesItem
	if json.Unmarshal(raw, &items) != nil {
		return nil, badRequest("input", "'input' must be a string or a list of input items.")
	}
	var out []chatMessageIn
	var reasoning *string
	// lastAssistant is the assistant turn function calls attach to.
	lastAssistant := func() *chatMessageIn {
		if n := len(out); n > 0 && out[n-1].Role == "assistant" {
			return &out[n-1]
		}
		out = append(out, chatMessageIn{Role: "assistant", ReasoningContent: reasoning})
		reasoning = nil
		return &out[len(out)-1]
	}
	for i, it := range items {
		p := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			text, e := responsesContent(it.Content, p)
			if e != nil {
				return nil, e
			}
			if !chatRoles[it.Role] || it.Role == "tool" {
				return nil, badRequest(p+".role", "%s.role must be user, assistant, system or developer, got %q.", p, it.Role)
			}
			msg := textMessage(it.Role, text)
			if it.Role == "assistant" {
				msg.ReasoningContent, reasoning = reasoning, nil
			}
			out = append(out, msg)
		case "function_call":
			if it.Name == "" {
				return nil, badRequest(p+".name", "%s: a function_call needs a name.", p)
			}
			call, _ := json.Marshal(map[string]any{"id": it.CallID, "type": "function",
				"function": map[string]any{"name": it.Name, "arguments": it.Arguments}})
			a := lastAssistant()
			a.ToolCalls = append(a.ToolCalls, call)
		case "function_call_output":
			text, e := responsesContent(it.Output, p+".output")
			if e != nil {
				return nil, e
			}
			msg := textMessage("tool", text)
			msg.ToolCallID = it.CallID
			out = append(out, msg)
		case "reasoning":
			var parts []string
			for _, s := range it.Summary {
				parts = append(parts, s.Text)
			}
			if t, _ := responsesContent(it.Content, p); t != "" {
				parts = append(parts, t)
			}
			r := strings.Join(parts, "\n")
			reasoning = &r
		default:
			return nil, badRequest(p+".type", "%s: items of type %q are not supported.", p, it.Type)
		}
	}
	return out, nil
}

// responsesContent reads a message's content: a string or text parts
// (input_text, output_text, reasoning_text, summary_text).
func responsesContent(raw json.RawMessage, p string) (string, *apiError) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", badRequest(p+".content", "%s.content must be a string or a list of text parts.", p)
	}
	var texts []string
	for j, part := range parts {
		switch part.Type {
		case "input_text", "output_text", "text", "reasoning_text", "summary_text":
			texts = append(texts, part.Text)
		default:
			return "", badRequest(fmt.Sprintf("%s.content[%d].type", p, j), "%s.content[%d]: %q parts are not supported (text-only models).", p, j, part.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// tools maps the flat function tools onto chat's.
func (r *responsesRequest) tools(req *chatRequest) *apiError {
	if len(r.Tools) == 0 {
		return nil
	}
	fns := make([]json.RawMessage, len(r.Tools))
	for i, t := range r.Tools {
		p := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return badRequest(p+".type", "%s.type is %q; only function tools are supported.", p, t.Type)
		}
		if t.Name == "" {
			return badRequest(p+".name", "%s needs a name.", p)
		}
		fn := map[string]any{"name": t.Name}
		if t.Description != "" {
			fn["description"] = t.Description
		}
		if !isNull(t.Parameters) {
			fn["parameters"] = t.Parameters
		}
		b, _ := json.Marshal(map[string]any{"type": "function", "function": fn})
		fns[i] = b
	}
	req.Tools, _ = json.Marshal(fns)
	var choice struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(r.ToolChoice, &choice) == nil && choice.Type == "function" {
		// Responses names the function flat; chat nests it.
		req.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": choice.Name}})
	}
	return nil
}

// Output items.

type respContent struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations,omitempty"`
}

type respItem struct {
	Type      string        `json:"type"`
	ID        string        `json:"id"`
	Status    string        `json:"status,omitempty"`
	Role      string        `json:"role,omitempty"`
	Content   []respContent `json:"-"` // see MarshalJSON
	Summary   []respContent `json:"summary,omitempty"`
	CallID    string        `json:"call_id,omitempty"`
	Name      string        `json:"name,omitempty"`
	Arguments *string       `json:"arguments,omitempty"`
}

// MarshalJSON writes content for messages and reasoning always (an item
// just added has "content": [], which the SDKs append parts to) and never
// for calls.
func (it respItem) MarshalJSON() ([]byte, error) {
	type plain respItem
	out := struct {
		plain
		Content *[]respContent `json:"content,omitempty"`
	}{plain: plain(it)}
	if it.Type == "message" || it.Type == "reasoning" {
		c := it.Content
		if c == nil {
			c = []respContent{}
		}
		out.Content = &c
	}
	return json.Marshal(out)
}

type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	TotalTokens        int `json:"total_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

type respObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Model              string             `json:"model"`
	Output             []respItem         `json:"output"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Error              any                `json:"error"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Temperature        *float64           `json:"temperature"`
	TopP               *float64           `json:"top_p"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []responsesTool    `json:"tools"`
	Metadata           map[string]string  `json:"metadata"`
	Usage              *respUsage         `json:"usage"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

// newRespObject is the response before its output: what the request set.
func newRespObject(j *chatJob, r *responsesRequest) *respObject {
	o := &respObject{ID: j.id, Object: "response", CreatedAt: j.created, Status: "in_progress", Model: j.m.name,
		Output: []respItem{}, Instructions: r.Instructions, MaxOutputTokens: r.MaxOutputTokens,
		ParallelToolCalls: r.ParallelToolCalls == nil || *r.ParallelToolCalls, Temperature: r.Temperature, TopP: r.TopP,
		ToolChoice: r.ToolChoice, Tools: r.Tools, Metadata: r.Metadata}
	if o.ToolChoice == nil {
		o.ToolChoice = json.RawMessage(`"auto"`)
	}
	if o.Tools == nil {
		o.Tools = []responsesTool{}
	}
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	if r.PreviousResponseID != "" {
		o.PreviousResponseID = &r.PreviousResponseID
	}
	return o
}

// finish fills the status and usage of a finished response.
func (o *respObject) finish(g *generation) {
	o.Status = "completed"
	if g.res.FinishReason == engine.FinishLength {
		o.Status = "incomplete"
		o.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	u := &respUsage{InputTokens: g.usage.PromptTokens, OutputTokens: g.usage.CompletionTokens, TotalTokens: g.usage.TotalTokens}
	if d := g.usage.PromptTokensDetails; d != nil {
		u.InputTokensDetails.CachedTokens = d.CachedTokens
	}
	o.Usage = u
}

// respItems is a whole answer as output items.
func respItems(a *answer) []respItem {
	var out []respItem
	if r := a.reasoning.String(); r != "" {
		out = append(out, respItem{Type: "reasoning", ID: newID("rs_"), Summary: []respContent{},
			Content: []respContent{{Type: "reasoning_text", Text: r}}})
	}
	if c := a.content.String(); c != "" || len(a.calls) == 0 {
		out = append(out, respItem{Type: "message", ID: newID("msg_"), Status: "completed", Role: "assistant",
			Content: []respContent{{Type: "output_text", Text: c, Annotations: []any{}}}})
	}
	for _, c := range a.calls {
		args := c.Function.Arguments
		out = append(out, respItem{Type: "function_call", ID: "fc_" + strings.TrimPrefix(c.ID, "call_"), Status: "completed",
			CallID: c.ID, Name: c.Function.Name, Arguments: &args})
	}
	return out
}

// historyOf is what a response adds to the conversation: its input turns
// and its answer as an assistant turn.
func historyOf(req *chatRequest, a *answer) []chatMessageIn {
	h := req.Messages
	if len(h) > 0 && h[0].Role == "system" {
		h = h[1:] // instructions are not carried over (as OpenAI)
	}
	h = append([]chatMessageIn(nil), h...)
	msg := textMessage("assistant", a.content.String())
	for _, c := range a.calls {
		b, _ := json.Marshal(map[string]any{"id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Function.Name, "arguments": c.Function.Arguments}})
		msg.ToolCalls = append(msg.ToolCalls, b)
	}
	if r := a.reasoning.String(); r != "" {
		msg.ReasoningContent = &r
	}
	return append(h, msg)
}

// responseStore keeps the latest responses (object and conversation) for
// previous_response_id and GET /v1/responses/{id}, least recently stored
// dropped first.
type responseStore struct {
	mu    sync.Mutex
	items map[string]*list.Element
	order *list.List
}

type storedResponse struct {
	id      string
	object  []byte
	history []chatMessageIn
}

const maxStoredResponses = 1024

var responseStores sync.Map // *served -> *responseStore

func (m *served) responses() *responseStore {
	st, _ := responseStores.LoadOrStore(m, &responseStore{items: map[string]*list.Element{}, order: list.New()})
	return st.(*responseStore)
}

func (st *responseStore) put(r storedResponse) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.items[r.id] = st.order.PushBack(r)
	for st.order.Len() > maxStoredResponses {
		old := st.order.Remove(st.order.Front()).(storedResponse)
		delete(st.items, old.id)
	}
}

func (st *responseStore) get(id string) (storedResponse, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.items[id]
	if !ok {
		return storedResponse{}, false
	}
	return e.Value.(storedResponse), true
}

// prepare validates a request and builds its job.
func (s *Server) prepareResponse(w http.ResponseWriter, r *http.Request, m *served) (*responsesRequest, *chatRequest, *chatJob, *apiError) {
	var rr responsesRequest
	if e := readJSON(w, r, s.opts.MaxBodyBytes, &rr); e != nil {
		return nil, nil, nil, e
	}
	var history []chatMessageIn
	if rr.PreviousResponseID != "" {
		prev, ok := m.responses().get(rr.PreviousResponseID)
		if !ok {
			return nil, nil, nil, badRequest("previous_response_id", "Previous response with id '%s' not found.", rr.PreviousResponseID)
		}
		history = prev.history
	}
	req, e := rr.chatRequest(history)
	if e != nil {
		return nil, nil, nil, e
	}
	j, e := newChatJob(m, req)
	if e != nil {
		return nil, nil, nil, e
	}
	j.id = newID("resp_")
	return &rr, req, j, nil
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) string {
	m := s.model()
	if m == nil {
		return s.reject(w, loadingError())
	}
	rr, req, j, e := s.prepareResponse(w, r, m)
	if e != nil {
		return s.reject(w, e)
	}
	if rr.Stream {
		return s.streamResponse(w, r, rr, req, j)
	}
	a := j.newAnswer()
	gens, e := s.runChoices(r.Context(), j, func(int, generate.Delta) error { return nil }, nil)
	if e != nil {
		return s.reject(w, e)
	}
	g := gens[0]
	if g.res.FinishReason == engine.FinishCancelled {
		return outcomeCancelled
	}
	if e := failed(&g.res); e != nil {
		return s.reject(w, e)
	}
	a.push(g.res.Text)
	a.close()
	o := newRespObject(j, rr)
	o.Output = respItems(a)
	o.finish(g)
	s.storeResponse(m, rr, req, a, o)
	writeJSON(w, http.StatusOK, o)
	return a.finish(finishReason(&g.res))
}

// storeResponse keeps the response unless the request said store: false.
func (s *Server) storeResponse(m *served, rr *responsesRequest, req *chatRequest, a *answer, o *respObject) {
	if rr.Store != nil && !*rr.Store {
		return
	}
	b, _ := json.Marshal(o)
	m.responses().put(storedResponse{id: o.ID, object: b, history: historyOf(req, a)})
}

// handleGetResponse is GET /v1/responses/{id}.
func (s *Server) handleGetResponse(w http.ResponseWriter, r *http.Request) {
	m := s.model()
	if m == nil {
		writeError(w, loadingError())
		return
	}
	st, ok := m.responses().get(r.PathValue("id"))
	if !ok {
		writeError(w, &apiError{status: http.StatusNotFound, typ: typeInvalid, param: "response_id",
			msg: fmt.Sprintf("No response with id '%s' is stored.", r.PathValue("id"))})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(st.object, '\n'))
}
