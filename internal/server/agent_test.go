package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

var weatherTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("The weather in a city"),
	Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}, "required": []string{"city"}},
})

var timeTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_time"})

func scriptedParams(trigger string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:       "scripted",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(trigger)},
		MaxTokens:   openai.Int(40),
		Temperature: openai.Float(0),
		Tools:       []openai.ChatCompletionToolUnionParam{weatherTool, timeTool},
	}
}

func startScripted(t *testing.T, o Options) *testServer {
	t.Helper()
	o.ServedModelName = "scripted"
	return startServer(t, buildScripted(t).load(t), o)
}

// TestSDKToolCalls: the model's Hermes markup comes back as OpenAI tool
// calls, non-streaming and streaming, through the official client.
func TestSDKToolCalls(t *testing.T) {
	s := startScripted(t, Options{})
	c := s.client()
	ctx := context.Background()
	resp, err := c.Chat.Completions.New(ctx, scriptedParams("<s_tool>"))
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != "Let me check." {
		t.Errorf("finish %q content %q", ch.FinishReason, ch.Message.Content)
	}
	calls := ch.Message.ToolCalls
	if len(calls) != 2 {
		t.Fatalf("tool calls %+v", calls)
	}
	want := [][2]string{{"get_weather", `{"city": "Paris", "days": 3}`}, {"get_time", `{}`}}
	for i, w := range want {
		tc := calls[i]
		if tc.Type != "function" || !strings.HasPrefix(tc.ID, "call_") || tc.Function.Name != w[0] || tc.Function.Arguments != w[1] {
			t.Errorf("call %d: %+v, want %v", i, tc, w)
		}
	}
	if calls[0].ID == calls[1].ID {
		t.Error("two calls share an id")
	}
	if resp.Usage.CompletionTokens != int64(len(scripts["<s_tool>"])+1) {
		t.Errorf("completion tokens %d", resp.Usage.CompletionTokens)
	}

	// Streaming: the accumulator of the SDK assembles the same calls; the
	// first delta of a call has its id and name, the arguments follow in
	// several pieces.
	stream := c.Chat.Completions.NewStreaming(ctx, scriptedParams("<s_tool>"))
	var acc openai.ChatCompletionAccumulator
	pieces := map[int64]int{}
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		for _, chc := range chunk.Choices {
			for _, d := range chc.Delta.ToolCalls {
				if d.ID != "" {
					if d.Function.Name == "" || d.Type != "function" || pieces[d.Index] != 0 {
						t.Errorf("first delta of call %d: %+v", d.Index, d)
					}
				} else if d.Function.Name != "" {
					t.Errorf("name outside the first delta: %+v", d)
				}
				pieces[d.Index]++
			}
			if strings.Contains(chc.Delta.Content, "<tool") {
				t.Errorf("markup in content delta %q", chc.Delta.Content)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	got := acc.Choices[0]
	if got.FinishReason != "tool_calls" || got.Message.Content != "Let me check." || len(got.Message.ToolCalls) != 2 {
		t.Fatalf("streamed %+v", got)
	}
	for i, w := range want {
		if tc := got.Message.ToolCalls[i]; tc.Function.Name != w[0] || tc.Function.Arguments != w[1] || !strings.HasPrefix(tc.ID, "call_") {
			t.Errorf("streamed call %d: %+v", i, tc)
		}
	}
	if pieces[0] < 3 {
		t.Errorf("call 0 came in %d deltas; want its name, then arguments in pieces", pieces[0])
	}

	// parallel_tool_calls false keeps the first call only.
	p := scriptedParams("<s_tool>")
	p.ParallelToolCalls = openai.Bool(false)
	resp, err = c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if calls := resp.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].Function.Name != "get_weather" {
		t.Errorf("parallel_tool_calls=false: %+v", calls)
	}

	// tool_choice none: no parsing, the markup is the content.
	p = scriptedParams("<s_tool>")
	p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
	resp, err = c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.Choices[0]; m.FinishReason != "stop" || len(m.Message.ToolCalls) != 0 || m.Message.Content != strings.Join(scripts["<s_tool>"], "") {
		t.Errorf("tool_choice none: %q %q %+v", m.FinishReason, m.Message.Content, m.Message.ToolCalls)
	}

	// A named tool_choice among the tools is accepted.
	p = scriptedParams("<s_tool>")
	p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})
	if _, err := c.Chat.Completions.New(ctx, p); err != nil {
		t.Errorf("named tool_choice: %v", err)
	}
	// Not among them: 400 naming the parameter.
	p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_stock"})
	_, err = c.Chat.Completions.New(ctx, p)
	var apiErr *openai.Error
	if !asAPIError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "tool_choice" {
		t.Errorf("unknown named tool: %v", err)
	}
}

func asAPIError(err error, out **openai.Error) bool {
	e, ok := err.(*openai.Error)
	if ok {
		*out = e
	}
	return ok
}

// TestSDKToolLoop: the answer's tool calls sent back as history (the
// arguments as the JSON strings the server gave) with the tool's result
// render and run, as an agent loop does.
func TestSDKToolLoop(t *testing.T) {
	s := startScripted(t, Options{})
	c := s.client()
	ctx := context.Background()
	p := scriptedParams("<s_tool>")
	resp, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	p.Messages = append(p.Messages, msg.ToParam())
	for _, tc := range msg.ToolCalls {
		p.Messages = append(p.Messages, openai.ToolMessage(`{"temp": 21}`, tc.ID))
	}
	p.Messages = append(p.Messages, openai.UserMessage("<s_plain>"))
	resp, err = c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "Hello world" || resp.Choices[0].FinishReason != "stop" {
		t.Errorf("second turn: %q %q", got, resp.Choices[0].FinishReason)
	}
}

// TestSDKReasoning: the thought comes back as reasoning_content, the rest
// as content, streaming or not.
func TestSDKReasoning(t *testing.T) {
	s := startScripted(t, Options{})
	c := s.client()
	ctx := context.Background()
	p := scriptedParams("<s_think>")
	p.Tools = nil
	resp, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Choices[0].Message
	var reasoning string
	if f, ok := m.JSON.ExtraFields["reasoning_content"]; ok {
		json.Unmarshal([]byte(f.Raw()), &reasoning)
	}
	const wantR = "The user wants a number.\nSo: 42."
	if m.Content != "It is 42." || reasoning != wantR {
		t.Errorf("content %q reasoning %q", m.Content, reasoning)
	}
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	var content, rs strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			content.WriteString(ch.Delta.Content)
			if f, ok := ch.Delta.JSON.ExtraFields["reasoning_content"]; ok {
				var piece string
				json.Unmarshal([]byte(f.Raw()), &piece)
				rs.WriteString(piece)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content.String() != "It is 42." || rs.String() != wantR {
		t.Errorf("streamed content %q reasoning %q", content.String(), rs.String())
	}
	// --reasoning-parser none leaves the thought in the content.
	off := startScripted(t, Options{Agent: AgentOptions{ReasoningParser: "none"}})
	oc := off.client()
	resp, err = oc.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != strings.Join(scripts["<s_think>"], "") {
		t.Errorf("parser off: %q", got)
	}
}

// TestSDKChoices: n choices, each complete, the later ones reading the
// prompt's KV from the prefix cache; streaming too, with choice indexes.
func TestSDKChoices(t *testing.T) {
	s := startScripted(t, Options{})
	c := s.client()
	ctx := context.Background()
	p := scriptedParams("<s_plain>")
	p.N = openai.Int(3)
	before := s.Engine().Stats().PrefixCacheHits
	resp, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 3 {
		t.Fatalf("%d choices", len(resp.Choices))
	}
	for i, ch := range resp.Choices {
		if ch.Index != int64(i) || ch.Message.Content != "Hello world" || ch.FinishReason != "stop" {
			t.Errorf("choice %d: %+v", i, ch)
		}
	}
	if resp.Usage.CompletionTokens != 9 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+9 {
		t.Errorf("usage %+v", resp.Usage)
	}
	if hits := s.Engine().Stats().PrefixCacheHits - before; hits < 2*16 {
		t.Errorf("prefix cache hits %d: the later choices did not reuse the prompt's blocks", hits)
	}

	p.N = openai.Int(2)
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	texts := map[int64]string{}
	finish := map[int64]string{}
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			texts[ch.Index] += ch.Delta.Content
			if ch.FinishReason != "" {
				finish[ch.Index] = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(texts) != 2 || texts[0] != "Hello world" || texts[1] != "Hello world" || finish[0] != "stop" || finish[1] != "stop" {
		t.Errorf("streamed choices %v finish %v", texts, finish)
	}
}

// TestSDKLogitBias: a bias changes what greedy decoding picks.
func TestSDKLogitBias(t *testing.T) {
	sm := buildScripted(t)
	s := startServer(t, sm.load(t), Options{ServedModelName: "scripted"})
	c := s.client()
	p := scriptedParams("<s_plain>")
	p.Tools = nil
	// The bias holds at every step: Bye outweighs what the script says
	// follows it too.
	p.LogitBias = map[string]int64{fmt.Sprint(sm.ids["Bye"]): 30}
	p.MaxTokens = openai.Int(3)
	resp, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "ByeByeBye" || resp.Choices[0].FinishReason != "length" {
		t.Errorf("with a +30 bias on Bye: %q %q", got, resp.Choices[0].FinishReason)
	}
	// The same bias on a token the script reaches: no change.
	p.LogitBias = map[string]int64{fmt.Sprint(sm.ids["!!"]): 3}
	resp, err = c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "Hello world" {
		t.Errorf("with a small bias elsewhere: %q", got)
	}
	p.LogitBias = map[string]int64{fmt.Sprint(sm.ids["Hello"]): -100, fmt.Sprint(sm.ids[" world"]): 20}
	resp, err = c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; !strings.HasPrefix(got, " world") || strings.Contains(got, "Hello") {
		t.Errorf("with Hello banned: %q", got)
	}
	// Completions take the bias too.
	status, body := s.post(t, "/v1/completions", fmt.Sprintf(`{"prompt": "x <s_plain>", "temperature": 0, "max_tokens": 2, "logit_bias": {"%d": 30}}`, sm.ids["Bye"]))
	if ch, _ := body["choices"].([]any); status != 200 || len(ch) != 1 || ch[0].(map[string]any)["text"] != "ByeBye" {
		t.Errorf("completions with a bias: %d %v", status, body)
	}
	p.LogitBias = map[string]int64{"7": 101}
	_, err = c.Chat.Completions.New(context.Background(), p)
	var apiErr *openai.Error
	if !asAPIError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "logit_bias" {
		t.Errorf("bias 101: %v", err)
	}
}

// TestCORS: off by default; with --allowed-origins a preflight is
// answered before authentication and responses carry the origin.
func TestCORS(t *testing.T) {
	l := loadModel(t, "")
	preflight := func(s *testServer, origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", s.url+"/v1/chat/completions", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, x-stainless-os")
		resp, err := s.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	off := startServer(t, l, Options{})
	if r := preflight(off, "http://localhost:3000"); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS headers without --allowed-origins: %v", r.Header)
	}

	s := startServer(t, l, Options{APIKey: "sk-test", AllowedOrigins: []string{"http://localhost:3000"}})
	r := preflight(s, "http://localhost:3000")
	h := r.Header
	if r.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "http://localhost:3000" ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		h.Get("Access-Control-Allow-Headers") != "authorization, content-type, x-stainless-os" {
		t.Errorf("preflight: %d %v", r.StatusCode, h)
	}
	// A real request from the allowed origin: the key is still required,
	// and both answers carry the allow-origin header.
	for _, key := range []string{"", "sk-test"} {
		req, _ := http.NewRequest("GET", s.url+"/v1/models", nil)
		req.Header.Set("Origin", "http://localhost:3000")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := s.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := map[string]int{"": 401, "sk-test": 200}[key]
		if resp.StatusCode != want || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
			t.Errorf("key %q: %d %v", key, resp.StatusCode, resp.Header)
		}
	}
	// Another origin gets no CORS headers.
	if r := preflight(s, "http://evil.example"); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("foreign origin allowed: %v", r.Header)
	}
	// "*" allows any origin.
	any := startServer(t, l, Options{AllowedOrigins: []string{"*"}})
	if r := preflight(any, "https://app.example"); r.StatusCode != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("'*': %d %v", r.StatusCode, r.Header)
	}
}

// TestModelByID: GET /v1/models/{id} through the SDK; unknown ids get
// the OpenAI 404.
func TestModelByID(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{ServedModelName: "org/tiny"})
	c := s.client()
	m, err := c.Models.Get(context.Background(), "org/tiny")
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "org/tiny" || m.Object != "model" || m.OwnedBy != "mlxcel" {
		t.Errorf("model %+v", m)
	}
	status, body := s.get(t, "/v1/models/gpt-9")
	if e := errorOf(t, body); status != 404 || e["code"] != "model_not_found" || e["param"] != "model" {
		t.Errorf("unknown model: %d %v", status, body)
	}
}
