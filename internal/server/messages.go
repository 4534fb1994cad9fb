package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
)

// The Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens):
// a request is translated into the chat request it means (system first,
// tool_use blocks as tool calls, tool_result blocks as tool messages,
// thinking as reasoning_content) and runs through the same job, parsers
// and engine as /v1/chat/completions; only the shapes differ.

type messagesRequest struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []anthMessage   `json:"messages"`
	Tools         []anthTool      `json:"tools"`
	ToolChoice    *anthToolChoice `json:"tool_choice"`
	StopSequences []string        `json:"stop_sequences"`
	Stream        bool            `json:"stream"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	Thinking      *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
}

type anthMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  string          `json:"thinking"`
}

type anthTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Type        string          `json:"type"`
}

type anthToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// anthError is an error in Anthropic's shape: {"type": "error",
// "error": {"type", "message"}}; the parameter is named in the message.
func writeAnthError(w http.ResponseWriter, e *apiError) {
	typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
		404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}[e.status]
	if typ == "" {
		typ = "api_error"
	}
	msg := e.msg
	if e.param != "" && !strings.Contains(msg, e.param) {
		msg = e.param + ": " + msg
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.retryAfter))
	}
	writeJSON(w, e.status, map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

func (s *Server) rejectAnth(w http.ResponseWriter, e *apiError) string {
	if e.status != 499 {
		writeAnthError(w, e)
	}
	return outcomeOf(e)
}

// chatRequest translates the request; field errors name Anthropic's
// fields.
func (r *messagesRequest) chatRequest() (*chatRequest, *apiError) {
	if r.MaxTokens == nil {
		return nil, badRequest("max_tokens", "max_tokens: Field required.")
	}
	if len(r.Messages) == 0 {
		return nil, badRequest("messages", "messages: at least one message is required.")
	}
	req := &chatRequest{}
	req.Model, req.MaxTokens, req.Stream = r.Model, r.MaxTokens, r.Stream
	req.Temperature, req.TopP, req.TopK = r.Temperature, r.TopP, r.TopK
	if len(r.StopSequences) > 0 {
		req.Stop, _ = json.Marshal(r.StopSequences)
	}
	if sys, e := anthSystem(r.System); e != nil {
		return nil, e
	} else if sys != "" {
		req.Messages = append(req.Messages, textMessage("system", sys))
	}
	for i, m := range r.Messages {
		msgs, e := anthTurn(m, i)
		if e != nil {
			return nil, e
		}
		req.Messages = append(req.Messages, msgs...)
	}
	if e := r.tools(req); e != nil {
		return nil, e
	}
	if t := r.Thinking; t != nil {
		switch t.Type {
		case "enabled", "adaptive":
			on := true
			req.EnableThinking = &on
		case "disabled":
			off := false
			req.EnableThinking = &off
		default:
			return nil, badRequest("thinking.type", "thinking.type must be \"enabled\" or \"disabled\", got %q.", t.Type)
		}
	}
	return req, nil
}

// anthSystem reads "system": a string or a list of text blocks.
func anthSystem(raw json.RawMessage) (string, *apiError) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []anthBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return "", badRequest("system", "system must be a string or a list of text blocks.")
	}
	var texts []string
	for i, b := range blocks {
		if b.Type != "text" {
			return "", badRequest(fmt.Sprintf("system[%d].type", i), "system blocks must be text, got %q.", b.Type)
		}
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

func textMessage(role, text string) chatMessageIn {
	c, _ := json.Marshal(text)
	return chatMessageIn{Role: role, Content: c}
}

// anthTurn turns one message into chat messages: a user turn's
// tool_result blocks become tool messages (before its text), an
// assistant turn's tool_use blocks its tool calls and its thinking its
// reasoning_content.
func anthTurn(m anthMessage, i int) ([]chatMessageIn, *apiError) {
	param := fmt.Sprintf("messages[%d]", i)
	if m.Role != "user" && m.Role != "assistant" {
		return nil, badRequest(param+".role", "messages[%d].role must be \"user\" or \"assistant\", got %q.", i, m.Role)
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []chatMessageIn{textMessage(m.Role, s)}, nil
	}
	var blocks []anthBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		return nil, badRequest(param+".content", "messages[%d].content must be a string or a list of content blocks.", i)
	}
	var out []chatMessageIn
	var texts, thinking []string
	var calls []json.RawMessage
	for j, b := range blocks {
		bp := fmt.Sprintf("%s.content[%d]", param, j)
		switch {
		case b.Type == "text":
			texts = append(texts, b.Text)
		case b.Type == "thinking" && m.Role == "assistant":
			thinking = append(thinking, b.Thinking)
		case b.Type == "redacted_thinking" && m.Role == "assistant":
		case b.Type == "tool_use" && m.Role == "assistant":
			if b.Name == "" {
				return nil, badRequest(bp+".name", "%s: a tool_use block needs a name.", bp)
			}
			input := b.Input
			if isNull(input) {
				input = json.RawMessage("{}")
			}
			call, _ := json.Marshal(map[string]any{"id": b.ID, "type": "function",
				"function": map[string]any{"name": b.Name, "arguments": string(input)}})
			calls = append(calls, call)
		case b.Type == "tool_result" && m.Role == "user":
			text, e := toolResultText(b.Content, bp)
			if e != nil {
				return nil, e
			}
			msg := textMessage("tool", text)
			msg.ToolCallID = b.ToolUseID
			out = append(out, msg)
		default:
			return nil, badRequest(bp+".type", "%s: %q blocks are not supported in %s messages (text-only models).", bp, b.Type, m.Role)
		}
	}
	if len(texts) == 0 && len(calls) == 0 && len(thinking) == 0 {
		return out, nil
	}
	msg := textMessage(m.Role, strings.Join(texts, "\n"))
	if len(texts) == 0 && len(calls) > 0 {
		msg.Content = nil
	}
	msg.ToolCalls = calls
	if len(thinking) > 0 {
		r := strings.Join(thinking, "\n")
		msg.ReasoningContent = &r
	}
	return append(out, msg), nil
}

// toolResultText: a tool_result's content is a string or text blocks.
func toolResultText(raw json.RawMessage, param string) (string, *apiError) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []anthBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return "", badRequest(param+".content", "%s.content must be a string or text blocks.", param)
	}
	var texts []string
	for _, b := range blocks {
		if b.Type != "text" {
			return "", badRequest(param+".content", "%s.content: only text blocks are supported, got %q.", param, b.Type)
		}
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// tools maps tools (input_schema as the function's parameters) and
// tool_choice (auto, any = required, tool = named, none).
func (r *messagesRequest) tools(req *chatRequest) *apiError {
	if len(r.Tools) > 0 {
		fns := make([]json.RawMessage, len(r.Tools))
		for i, t := range r.Tools {
			if t.Type != "" && t.Type != "custom" {
				return badRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d]: server tools (%q) are not supported.", i, t.Type)
			}
			if t.Name == "" {
				return badRequest(fmt.Sprintf("tools[%d].name", i), "tools[%d] needs a name.", i)
			}
			schema := t.InputSchema
			if isNull(schema) {
				return badRequest(fmt.Sprintf("tools[%d].input_schema", i), "tools[%d].input_schema: Field required.", i)
			}
			name, _ := json.Marshal(t.Name)
			desc, _ := json.Marshal(t.Description)
			fns[i] = json.RawMessage(`{"type": "function", "function": {"name": ` + string(name) + `, "description": ` +
				string(desc) + `, "parameters": ` + string(schema) + `}}`)
		}
		req.Tools, _ = json.Marshal(fns)
	}
	tc := r.ToolChoice
	if tc == nil {
		return nil
	}
	var choice any
	switch tc.Type {
	case "auto", "none":
		choice = tc.Type
	case "any":
		choice = "required"
	case "tool":
		choice = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
	default:
		return badRequest("tool_choice.type", "tool_choice.type must be auto, any, tool or none, got %q.", tc.Type)
	}
	req.ToolChoice, _ = json.Marshal(choice)
	if tc.DisableParallelToolUse {
		no := false
		req.ParallelToolCalls = &no
	}
	return nil
}

// Response shapes.

type anthContent struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

type anthUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type anthResponse struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	Role         string        `json:"role"`
	Model        string        `json:"model"`
	Content      []anthContent `json:"content"`
	StopReason   *string       `json:"stop_reason"`
	StopSequence *string       `json:"stop_sequence"`
	Usage        anthUsage     `json:"usage"`
}

// stopReason maps a finished choice: tool calls, a stop string, the
// length limit, else the model's end of turn.
func stopReason(a *answer, res *generate.Result) (reason string, seq *string) {
	switch {
	case res.FinishReason == engine.FinishLength:
		return "max_tokens", nil
	case len(a.calls) > 0:
		return "tool_use", nil
	case res.StopString != "":
		s := res.StopString
		return "stop_sequence", &s
	}
	return "end_turn", nil
}

func toolUseID(callID string) string { return "toolu_" + strings.TrimPrefix(callID, "call_") }

// anthBlocks is a whole answer as content blocks.
func anthBlocks(a *answer) []anthContent {
	var out []anthContent
	if r := a.reasoning.String(); r != "" {
		sig := ""
		out = append(out, anthContent{Type: "thinking", Thinking: &r, Signature: &sig})
	}
	if c := a.content.String(); c != "" || len(a.calls) == 0 {
		out = append(out, anthContent{Type: "text", Text: &c})
	}
	for _, c := range a.calls {
		input := json.RawMessage(c.Function.Arguments)
		if !isObject(input) {
			input = json.RawMessage("{}") // cut off by max_tokens: no object to give
		}
		out = append(out, anthContent{Type: "tool_use", ID: toolUseID(c.ID), Name: c.Function.Name, Input: input})
	}
	return out
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) string {
	m := s.model()
	if m == nil {
		return s.rejectAnth(w, loadingError())
	}
	var mr messagesRequest
	if e := readJSON(w, r, s.opts.MaxBodyBytes, &mr); e != nil {
		return s.rejectAnth(w, e)
	}
	req, e := mr.chatRequest()
	if e != nil {
		return s.rejectAnth(w, e)
	}
	j, e := newChatJob(m, req)
	if e != nil {
		return s.rejectAnth(w, e)
	}
	j.id = newID("msg_")
	if mr.Stream {
		return s.streamMessages(w, r, j)
	}
	a := j.newAnswer()
	gens, e := s.runChoices(r.Context(), j, func(int, generate.Delta) error { return nil }, nil)
	if e != nil {
		return s.rejectAnth(w, e)
	}
	g := gens[0]
	if g.res.FinishReason == engine.FinishCancelled {
		return outcomeCancelled
	}
	if e := failed(&g.res); e != nil {
		return s.rejectAnth(w, e)
	}
	a.push(g.res.Text)
	a.close()
	reason, seq := stopReason(a, &g.res)
	writeJSON(w, http.StatusOK, anthResponse{ID: j.id, Type: "message", Role: "assistant", Model: m.name,
		Content: anthBlocks(a), StopReason: &reason, StopSequence: seq,
		Usage: anthUsage{InputTokens: g.usage.PromptTokens, OutputTokens: g.usage.CompletionTokens}})
	return reason
}

// handleCountTokens is POST /v1/messages/count_tokens: the prompt the
// request renders to, in tokens.
func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	m := s.model()
	if m == nil {
		writeAnthError(w, loadingError())
		return
	}
	var mr messagesRequest
	if e := readJSON(w, r, s.opts.MaxBodyBytes, &mr); e != nil {
		writeAnthError(w, e)
		return
	}
	if mr.MaxTokens == nil {
		one := 1 // not required here
		mr.MaxTokens = &one
	}
	req, e := mr.chatRequest()
	if e == nil {
		e = req.check(m)
	}
	if e != nil {
		writeAnthError(w, e)
		return
	}
	ids, _, e := req.prompt(m)
	if e != nil {
		writeAnthError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(ids)})
}
