package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

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
	// Tools reach the template as "tools"; tool_choice and
	// parallel_tool_calls decide how the answer is read (tools.go).
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	// ResponseFormat is enforced by constrained decoding (constraint.go).
	ResponseFormat json.RawMessage `json:"response_format"`
	// ChatTemplateKwargs are template variables (as in vLLM);
	// reasoning_effort and enable_thinking map onto the ones the template
	// reads (templateKwargs).
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
	ReasoningEffort    *string        `json:"reasoning_effort"`
	EnableThinking     *bool          `json:"enable_thinking"`
}

type chatMessageIn struct {
	Role             string            `json:"role"`
	Content          json.RawMessage   `json:"content"`
	Name             string            `json:"name"`
	ToolCalls        []json.RawMessage `json:"tool_calls"`
	ToolCallID       string            `json:"tool_call_id"`
	ReasoningContent *string           `json:"reasoning_content"`
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
// plain fallback, see plainchat.go) and tokenizes it; text is the
// rendered prompt ("" for the fallback).
func (req *chatRequest) prompt(m *served) (ids []int32, text string, e *apiError) {
	if len(req.Messages) == 0 {
		return nil, "", badRequest("messages", "'messages' must contain at least one message.")
	}
	msgs := make([]chat.Message, 0, len(req.Messages))
	texts := make([]string, 0, len(req.Messages))
	for i, in := range req.Messages {
		if !chatRoles[in.Role] {
			return nil, "", badRequest(fmt.Sprintf("messages[%d].role", i),
				"Unknown role %q in message %d; expected system, developer, user, assistant or tool.", in.Role, i)
		}
		content, text, e := messageContent(in.Content, i)
		if e != nil {
			return nil, "", e
		}
		if content == nil && !(in.Role == "assistant" && len(in.ToolCalls) > 0) {
			return nil, "", badRequest(fmt.Sprintf("messages[%d].content", i), "Message %d (%s) has no content.", i, in.Role)
		}
		if content == nil {
			// An assistant turn of only tool calls, as the SDKs send it
			// (content null): templates get "", as vLLM gives them, since
			// some test the content as a string (Qwen3's '</think>' in
			// message.content fails on None).
			content = ""
		}
		msg, e := historyMessage(in, i, content, m.agent)
		if e != nil {
			return nil, "", e
		}
		msgs = append(msgs, msg)
		texts = append(texts, text)
	}
	if e := m.textTooLong("messages", texts...); e != nil {
		return nil, "", e // prompts.go: refused before rendering
	}
	if m.templateErr != nil {
		return nil, "", templateLoadError(m.templateErr)
	}
	if m.template == nil {
		if !m.plainChat {
			return nil, "", badRequest("messages", "The model %s has no chat template (chat_template.jinja or tokenizer_config.json), "+
				"so it cannot take chat requests; use /v1/completions with a formatted prompt.", m.name)
		}
		ids, err := m.plainChatPrompt(texts)
		if err != nil {
			return nil, "", badRequest("messages", "tokenizing the messages: %v", err)
		}
		return ids, "", nil
	}
	extra := req.templateKwargs(m.agent)
	if !isNull(req.Tools) {
		// Raw JSON keeps the client's key order and number spellings.
		extra["tools"] = req.Tools
	}
	text, err := m.template.Render(msgs, true, extra)
	if err != nil {
		return nil, "", templateError(err)
	}
	// The template writes BOS itself where the model wants one.
	ids, err = m.tok.Encode(text, false)
	if err != nil {
		return nil, "", badRequest("messages", "tokenizing the rendered conversation: %v", err)
	}
	return ids, text, nil
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
	Role             string        `json:"role"`
	Content          *string       `json:"content"`
	ReasoningContent string        `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallOut `json:"tool_calls,omitempty"`
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
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallDelta `json:"tool_calls,omitempty"`
}

type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
	Timings      *timings      `json:"-"`
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
	j, e := newChatJob(m, &req)
	if e != nil {
		return s.reject(w, e)
	}
	if req.Stream {
		return s.streamChat(w, r, j)
	}
	return s.completeChat(w, r, j)
}

func (s *Server) completeChat(w http.ResponseWriter, r *http.Request, j *chatJob) string {
	answers := make([]*answer, j.n)
	lps := make([]*chatLogprobs, j.n)
	for i := range j.n {
		answers[i] = j.newAnswer()
		if j.wantLP {
			lps[i] = &chatLogprobs{Content: []chatTokenLogprob{}}
		}
	}
	gens, e := s.runChoices(r.Context(), j, func(i int, d generate.Delta) error {
		if lps[i] != nil && d.Token >= 0 {
			lps[i].Content = append(lps[i].Content, j.m.chatLogprob(d, j.req.ReturnTokensAsTokenIDs))
		}
		return nil
	}, nil)
	if e != nil {
		return s.reject(w, e)
	}
	choices := make([]chatChoice, j.n)
	for i, g := range gens {
		if g.res.FinishReason == engine.FinishCancelled {
			return outcomeCancelled // the client is gone: nobody to answer
		}
		if e := failed(&g.res); e != nil {
			return s.reject(w, e)
		}
		a := answers[i]
		a.push(g.res.Text)
		a.close()
		choices[i] = chatChoice{Index: i, Message: a.message(), Logprobs: lps[i], FinishReason: a.finish(finishReason(&g.res))}
	}
	writeJSON(w, http.StatusOK, chatCompletion{
		ID: j.id, Object: "chat.completion", Created: j.created, Model: j.m.name,
		Choices: choices, Usage: sumUsage(gens), Timings: gens[0].timings,
	})
	return choices[0].FinishReason
}

// parallelCalls reports whether the answer may make several calls
// (parallel_tool_calls, true unless false, as OpenAI's default).
func (r *chatRequest) parallelCalls() bool { return r.ParallelToolCalls == nil || *r.ParallelToolCalls }
