package server

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/mlxcel/mlxcel/internal/chat"
)

// TestSpecialMarkup: when the tool-call markup is made of special tokens
// (Mistral's [TOOL_CALLS], Gemma 4's <|tool_call>), the decoder keeps
// them, so the calls are still found; answers without markup are as
// before.
func TestSpecialMarkup(t *testing.T) {
	sm := buildScripted(t, "<tool_call>", "</tool_call>")
	s := startServer(t, sm.load(t), Options{ServedModelName: "scripted"})
	if !s.model().agent.keepSpecial {
		t.Error("special markup tokens did not switch the decoder to keep them")
	}
	c := s.client()
	resp, err := c.Chat.Completions.New(context.Background(), scriptedParams("<s_tool>"))
	if err != nil {
		t.Fatal(err)
	}
	if calls := resp.Choices[0].Message.ToolCalls; len(calls) != 2 || calls[0].Function.Name != "get_weather" || calls[1].Function.Name != "get_time" {
		t.Errorf("calls %+v, content %q", calls, resp.Choices[0].Message.Content)
	}
	// The plain stories model has no special markup: specials stay hidden.
	if plain := startServer(t, loadModel(t, ""), Options{}); plain.model().agent.keepSpecial {
		t.Error("keepSpecial on for a model without parsers")
	}
}

// TestChatTemplateOverride: --chat-template replaces the model's
// template; the parsers follow the new one.
func TestChatTemplateOverride(t *testing.T) {
	sm := buildScripted(t)
	l := sm.load(t)
	path := testdata + "templates/qwen3.jinja"
	s := startServer(t, l, Options{ServedModelName: "scripted", Agent: AgentOptions{ChatTemplate: path}})
	m := s.model()
	src, _ := os.ReadFile(path)
	if m.template.Source() != string(src) || m.agent.toolParser != "hermes" || m.agent.reasoningParser != "think" {
		t.Fatalf("template from %s not used: parsers %q %q", path, m.agent.toolParser, m.agent.reasoningParser)
	}
	// The request renders through the Qwen 3 template (bos/eos from
	// tokenizer_config.json): the prompt's token count says so.
	tmpl, err := chat.Parse(string(src), "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	want, err := tmpl.Render([]chat.Message{{Role: "user", Content: "Hi there"}}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := l.Tokenizer.Encode(want, false)
	p := scriptedParams("Hi there")
	p.Tools = nil
	p.MaxTokens = openai.Int(1)
	c := s.client()
	resp, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.PromptTokens != int64(len(ids)) || !strings.Contains(want, "<|im_start|>assistant\n") {
		t.Errorf("prompt tokens %d, the Qwen 3 render has %d", resp.Usage.PromptTokens, len(ids))
	}
	// A missing file fails Ready.
	bad := New(Options{Agent: AgentOptions{ChatTemplate: "/nonexistent.jinja"}})
	if err := bad.Ready(l); err == nil || !strings.Contains(err.Error(), "--chat-template") {
		t.Errorf("missing template file: %v", err)
	}
}

// TestAgentFlags: unknown parser names are refused before anything loads.
func TestAgentFlags(t *testing.T) {
	for _, args := range [][]string{{"--tool-call-parser", "nope"}, {"--reasoning-parser", "deepthink"}} {
		err := Main("mlxcel-server", args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "known parsers") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestReasoningKwargs: reasoning_effort and enable_thinking reach the
// template variable it reads (Qwen 3's enable_thinking, gpt-oss's
// reasoning_effort); chat_template_kwargs win.
func TestReasoningKwargs(t *testing.T) {
	src, err := os.ReadFile(testdata + "templates/qwen3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Parse(string(src), "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	qwen := agentModel{readsEnableThinking: true}
	str := func(s string) *string { return &s }
	yes, no := true, false
	cases := []struct {
		req      chatRequest
		closed   bool // the prompt closes an empty thought: thinking off
		override string
	}{
		{chatRequest{}, false, ""},
		{chatRequest{ReasoningEffort: str("none")}, true, ""},
		{chatRequest{ReasoningEffort: str("high")}, false, ""},
		{chatRequest{EnableThinking: &no}, true, ""},
		{chatRequest{EnableThinking: &no, ReasoningEffort: str("high")}, true, ""},
		{chatRequest{EnableThinking: &yes, ChatTemplateKwargs: map[string]any{"enable_thinking": false}}, true, ""},
	}
	for i, c := range cases {
		extra := c.req.templateKwargs(qwen)
		out, err := tmpl.Render([]chat.Message{{Role: "user", Content: "hi"}}, true, extra)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.HasSuffix(out, "<think>\n\n</think>\n\n"); got != c.closed {
			t.Errorf("case %d (%v): thought closed %v, want %v", i, extra, got, c.closed)
		}
	}
	// A template reading reasoning_effort gets it as sent.
	extra := (&chatRequest{ReasoningEffort: str("low")}).templateKwargs(agentModel{readsReasoningEffort: true})
	if extra["reasoning_effort"] != "low" || extra["enable_thinking"] != nil {
		t.Errorf("gpt-oss style kwargs %v", extra)
	}
}

// TestThinkingForGptOss: reasoning_content sent back reaches gpt-oss's
// template, which reads message.thinking (its real template renders the
// analysis of a tool-calling turn).
func TestThinkingForGptOss(t *testing.T) {
	src, err := os.ReadFile("../toolcall/testdata/gpt_oss.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Parse(string(src), "", "<|return|>")
	if err != nil {
		t.Fatal(err)
	}
	a := agentModel{readsThinking: strings.Contains(string(src), "message.thinking")}
	if !a.readsThinking {
		t.Fatal("the gpt-oss template does not read message.thinking")
	}
	reason := "Need the weather."
	ins := []chatMessageIn{
		textMessage("user", "Weather in Paris?"),
		{Role: "assistant", ReasoningContent: &reason, ToolCalls: []json.RawMessage{json.RawMessage(
			`{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}`)}},
		{Role: "tool", ToolCallID: "call_1", Content: json.RawMessage(`"sunny"`)},
	}
	msgs := make([]chat.Message, len(ins))
	for i, in := range ins {
		content, _, e := messageContent(in.Content, i)
		if e != nil {
			t.Fatal(e)
		}
		if msgs[i], e = historyMessage(in, i, content, a); e != nil {
			t.Fatal(e)
		}
	}
	out, err := tmpl.Render(msgs, true, map[string]any{"tools": json.RawMessage(`[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `<|start|>assistant<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>`
	if !strings.Contains(out, want) {
		t.Errorf("render lacks %q:\n%s", want, out)
	}
}

// TestNullContentToolTurn: the tool loop's history as the SDKs send it,
// an assistant turn of only tool calls with content null, renders through
// the Qwen 3 template (which tests '</think>' in message.content) as the
// same turn with content "" does, instead of failing the template.
func TestNullContentToolTurn(t *testing.T) {
	sm := buildScripted(t)
	l := sm.load(t)
	s := startServer(t, l, Options{ServedModelName: "scripted", Agent: AgentOptions{ChatTemplate: testdata + "templates/qwen3.jinja"}})
	call := []map[string]any{{"id": "call_1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`}}}
	usage := func(content any, last bool) float64 {
		msgs := []map[string]any{{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": content, "tool_calls": call}}
		if !last {
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "sunny"})
		}
		code, body := s.post(t, "/v1/chat/completions", map[string]any{"model": "scripted", "max_tokens": 1, "messages": msgs})
		if code != 200 {
			t.Fatalf("content %v (last turn %v): status %d: %v", content, last, code, body)
		}
		return body["usage"].(map[string]any)["prompt_tokens"].(float64)
	}
	for _, last := range []bool{false, true} {
		if null, empty := usage(nil, last), usage("", last); null != empty || null == 0 {
			t.Errorf("last turn %v: prompt tokens with content null %v, with \"\" %v", last, null, empty)
		}
	}
}
