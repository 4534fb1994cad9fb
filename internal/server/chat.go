package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
)

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	commonFields
	Messages []chatMessageIn `json:"messages"`
	// MaxCompletionTokens is the newer name of max_tokens; it wins.
	MaxCompletionTokens *int  `json:"max_completion_tokens"`
	Logprobs            *bool `json:"logprobs"`
	TopLogprobs         *int  `json:"top_logprobs"`
	// Tools and ChatTemplateKwargs reach the chat template (tools as
	// "tools", the kwargs as template variables, as in vLLM).
	Tools              json.RawMessage `json:"tools"`
	ChatTemplateKwargs map[string]any  `json:"chat_template_kwargs"`
}

type chatMessageIn struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"`
	Name       string           `json:"name"`
	ToolCalls  []map[string]any `json:"tool_calls"`
	ToolCallID string           `json:"tool_call_id"`
}

var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// messageContent reads a message's content: a string, null, or an array
// of text parts (joined with "\n", as vLLM flattens them for templates
// that expect a string). Other part types (images, audio) are refused:
// the models served here are text-only.
func messageContent(raw json.RawMessage, i int) (any, string, *apiError) {
	param := fmt.Sprintf("messages[%d].content", i)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, "", badRequest(param, "'%s' must be a string or an array of content parts.", param)
	}
	var texts []string
	for j, p := range parts {
		if p.Type != "text" {
			return nil, "", badRequest(param, "Content part %d of message %d has type %q; only text parts are supported.", j, i, p.Type)
		}
		if p.Text == nil {
			return nil, "", badRequest(param, "Content part %d of message %d has no text.", j, i)
		}
		texts = append(texts, *p.Text)
	}
	joined := strings.Join(texts, "\n")
	return joined, joined, nil
}

// prompt renders the conversation with the model's chat template (or the
// plain fallback, see plainchat.go) and tokenizes it.
func (req *chatRequest) prompt(m *served) ([]int32, *apiError) {
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "'messages' must contain at least one message.")
	}
	msgs := make([]chat.Message, 0, len(req.Messages))
	texts := make([]string, 0, len(req.Messages))
	for i, in := range req.Messages {
		if !chatRoles[in.Role] {
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i),
				"Unknown role %q in message %d; expected system, developer, user, assistant or tool.", in.Role, i)
		}
		content, text, e := messageContent(in.Content, i)
		if e != nil {
			return nil, e
		}
		if content == nil && !(in.Role == "assistant" && len(in.ToolCalls) > 0) {
			return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "Message %d (%s) has no content.", i, in.Role)
		}
		role := in.Role
		if role == "developer" {
			// OpenAI's newer name for system; templates know "system".
			role = "system"
		}
		msgs = append(msgs, chat.Message{Role: role, Content: content, Name: in.Name, ToolCalls: in.ToolCalls, ToolCallID: in.ToolCallID})
		texts = append(texts, text)
	}
	if m.template == nil {
		if !m.plainChat {
			return nil, badRequest("messages", "The model %s has no chat template (chat_template.jinja or tokenizer_config.json), "+
				"so it cannot take chat requests; use /v1/completions with a formatted prompt.", m.name)
		}
		ids, err := m.plainChatPrompt(texts)
		if err != nil {
			return nil, badRequest("messages", "tokenizing the messages: %v", err)
		}
		return ids, nil
	}
	extra := make(map[string]any, len(req.ChatTemplateKwargs)+1)
	for k, v := range req.ChatTemplateKwargs {
		extra[k] = v
	}
	if len(req.Tools) > 0 && string(req.Tools) != "null" {
		var tools any
		if err := json.Unmarshal(req.Tools, &tools); err != nil {
			return nil, badRequest("tools", "'tools' is not valid JSON: %v", err)
		}
		extra["tools"] = tools
	}
	text, err := m.template.Render(msgs, true, extra)
	if err != nil {
		return nil, templateError(err)
	}
	// The template writes BOS itself where the model wants one.
	ids, err := m.tok.Encode(text, false)
	if err != nil {
		return nil, badRequest("messages", "tokenizing the rendered conversation: %v", err)
	}
	return ids, nil
}

// logprobOptions: logprobs=true returns the chosen tokens' logprobs,
// top_logprobs (0..20, which needs logprobs=true) the alternatives.
func (req *chatRequest) logprobOptions() (want bool, top int, e *apiError) {
	want = req.Logprobs != nil && *req.Logprobs
	if req.TopLogprobs != nil {
		if !want {
			return false, 0, badRequest("top_logprobs", "top_logprobs requires logprobs to be true.")
		}
		top = *req.TopLogprobs
	}
	return want, top, nil
}

// Response shapes.

type chatMessageOut struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatChoice struct {
	Index        int            `json:"index"`
	Message      chatMessageOut `json:"message"`
	Logprobs     *chatLogprobs  `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   usage        `json:"usage"`
	Timings timings      `json:"timings"`
}

type chatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []chatChunkChoice `json:"choices"`
	Usage   *usage            `json:"usage,omitempty"`
	Timings *timings          `json:"timings,omitempty"`
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) string {
	m := s.model()
	if m == nil {
		return s.reject(w, loadingError())
	}
	var req chatRequest
	if e := readJSON(w, r, s.opts.MaxBodyBytes, &req); e != nil {
		return s.reject(w, e)
	}
	if e := req.check(m); e != nil {
		return s.reject(w, e)
	}
	wantLP, top, e := req.logprobOptions()
	if e != nil {
		return s.reject(w, e)
	}
	prompt, e := req.prompt(m)
	if e != nil {
		return s.reject(w, e)
	}
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		maxTokens = req.MaxCompletionTokens
	}
	greq, e := req.request(m, prompt, "messages", maxTokens, top)
	if e != nil {
		return s.reject(w, e)
	}
	greq.NeedLogprob = wantLP
	id, created := newID("chatcmpl-"), time.Now().Unix()
	if req.Stream {
		return s.streamChat(w, r, m, &req, greq, wantLP, id, created)
	}

	var lps *chatLogprobs
	if wantLP {
		lps = &chatLogprobs{Content: []chatTokenLogprob{}}
	}
	g, e := s.generate(r.Context(), m, greq, func(d generate.Delta) error {
		if lps != nil && d.Token >= 0 {
			lps.Content = append(lps.Content, m.chatLogprob(d, req.ReturnTokensAsTokenIDs))
		}
		return nil
	})
	if e != nil {
		return s.reject(w, e)
	}
	if g.res.FinishReason == engine.FinishCancelled {
		return outcomeCancelled // the client is gone: nobody to answer
	}
	if e := failed(&g.res); e != nil {
		return s.reject(w, e)
	}
	writeJSON(w, http.StatusOK, chatCompletion{
		ID: id, Object: "chat.completion", Created: created, Model: m.name,
		Choices: []chatChoice{{
			Message:      chatMessageOut{Role: "assistant", Content: g.res.Text},
			Logprobs:     lps,
			FinishReason: finishReason(&g.res),
		}},
		Usage:   g.usage,
		Timings: g.timings,
	})
	return finishReason(&g.res)
}

func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, m *served, req *chatRequest, greq generate.Request,
	wantLP bool, id string, created int64) string {
	out := newSSE(w)
	chunk := func(c chatChunkChoice) chatChunk {
		return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: m.name, Choices: []chatChunkChoice{c}}
	}
	roleSent := false
	sendRole := func() error {
		if roleSent {
			return nil
		}
		roleSent = true
		empty := ""
		return out.send(chunk(chatChunkChoice{Delta: chatDelta{Role: "assistant", Content: &empty}}))
	}
	g, e := s.generate(r.Context(), m, greq, func(d generate.Delta) error {
		var lp *chatLogprobs
		if wantLP && d.Token >= 0 {
			lp = &chatLogprobs{Content: []chatTokenLogprob{m.chatLogprob(d, req.ReturnTokensAsTokenIDs)}}
		}
		if d.Text == "" && lp == nil {
			return nil // nothing final yet (a partial character, a possible stop string)
		}
		if err := sendRole(); err != nil {
			return err
		}
		text := d.Text
		return out.send(chunk(chatChunkChoice{Delta: chatDelta{Content: &text}, Logprobs: lp}))
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
	// The last chunk carries llama-server's timings, as llama-server does.
	last := chunk(chatChunkChoice{Delta: chatDelta{}, FinishReason: &reason})
	last.Timings = &g.timings
	if sendRole() != nil || out.send(last) != nil {
		return outcomeCancelled
	}
	if req.includeUsage() {
		out.send(chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: m.name,
			Choices: []chatChunkChoice{}, Usage: &g.usage})
	}
	out.done()
	return reason
}
