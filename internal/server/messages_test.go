package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
)

// The official Anthropic Go SDK is the client: if it parses what the
// server sends, Anthropic clients can.

func (s *testServer) anthropicClient(key string) anthropic.Client {
	// Greedy decoding: the SDK's params have no temperature field any more.
	return anthropic.NewClient(aoption.WithBaseURL(s.url+"/"), aoption.WithAPIKey(key), aoption.WithMaxRetries(0),
		aoption.WithHTTPClient(s.ts.Client()), aoption.WithJSONSet("temperature", 0))
}

func anthTools() []anthropic.ToolUnionParam {
	weather := anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}},
		Required:   []string{"city"},
	}, "get_weather")
	clock := anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{Properties: map[string]any{}}, "get_time")
	return []anthropic.ToolUnionParam{weather, clock}
}

func anthParams(trigger string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "scripted",
		MaxTokens: 40,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(trigger))},
		Tools:     anthTools(),
	}
}

func TestAnthropicToolUse(t *testing.T) {
	s := startScripted(t, Options{APIKey: "sk-ant-test"})
	c := s.anthropicClient("sk-ant-test") // sent as x-api-key
	ctx := context.Background()
	msg, err := c.Messages.New(ctx, anthParams("<s_tool>"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "tool_use" || msg.Role != "assistant" || !strings.HasPrefix(msg.ID, "msg_") || len(msg.Content) != 3 {
		t.Fatalf("message %+v", msg)
	}
	if b := msg.Content[0]; b.Type != "text" || b.Text != "Let me check." {
		t.Errorf("block 0: %+v", b)
	}
	want := [][2]string{{"get_weather", `{"city": "Paris", "days": 3}`}, {"get_time", `{}`}}
	for i, w := range want {
		b := msg.Content[i+1]
		if b.Type != "tool_use" || !strings.HasPrefix(b.ID, "toolu_") || b.Name != w[0] || !jsonEqual(t, string(b.Input), w[1]) {
			t.Errorf("block %d: %+v, want %v", i+1, b, w)
		}
	}
	if msg.Usage.OutputTokens != int64(len(scripts["<s_tool>"])+1) || msg.Usage.InputTokens == 0 {
		t.Errorf("usage %+v", msg.Usage)
	}

	// Streaming: the SDK's accumulator rebuilds the same message.
	stream := c.Messages.NewStreaming(ctx, anthParams("<s_tool>"))
	var acc anthropic.Message
	events := map[string]int{}
	for stream.Next() {
		ev := stream.Current()
		events[ev.Type]++
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.StopReason != "tool_use" || len(acc.Content) != 3 || acc.Content[0].Text != "Let me check." {
		t.Fatalf("streamed %+v", acc)
	}
	for i, w := range want {
		if b := acc.Content[i+1]; b.Name != w[0] || !jsonEqual(t, string(b.Input), w[1]) {
			t.Errorf("streamed block %d: %+v", i+1, b)
		}
	}
	if events["message_start"] != 1 || events["content_block_start"] != 3 || events["content_block_stop"] != 3 ||
		events["message_delta"] != 1 || events["message_stop"] != 1 || events["content_block_delta"] < 4 {
		t.Errorf("events %v", events)
	}

	// The tool loop: the answer and tool results sent back.
	p := anthParams("<s_tool>")
	p.Messages = append(p.Messages, msg.ToParam(), anthropic.NewUserMessage(
		anthropic.NewToolResultBlock(msg.Content[1].ID, "21 C", false),
		anthropic.NewToolResultBlock(msg.Content[2].ID, "noon", false),
		anthropic.NewTextBlock("<s_plain>")))
	msg, err = c.Messages.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "end_turn" || len(msg.Content) != 1 || msg.Content[0].Text != "Hello world" {
		t.Errorf("second turn %+v", msg)
	}

	// Counting tokens agrees with the usage of the same request.
	n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "scripted",
		Messages: anthParams("<s_plain>").Messages})
	if err != nil {
		t.Fatal(err)
	}
	plain := anthParams("<s_plain>")
	plain.Tools = nil
	first, _ := c.Messages.New(ctx, plain)
	if n.InputTokens != first.Usage.InputTokens {
		t.Errorf("count_tokens %d, usage %d", n.InputTokens, first.Usage.InputTokens)
	}

	// Errors in Anthropic's shape.
	wrong := s.anthropicClient("wrong")
	_, err = wrong.Messages.New(ctx, anthParams("<s_plain>"))
	if e, ok := err.(*anthropic.Error); !ok || e.StatusCode != 401 || !strings.Contains(e.RawJSON(), `"type":"authentication_error"`) ||
		!strings.Contains(e.RawJSON(), `"type":"error"`) {
		t.Errorf("wrong key: %v", err)
	}
	bad := anthParams("<s_plain>")
	bad.ToolChoice = anthropic.ToolChoiceParamOfTool("get_stock")
	_, err = c.Messages.New(ctx, bad)
	if e, ok := err.(*anthropic.Error); !ok || e.StatusCode != 400 || !strings.Contains(e.RawJSON(), `"type":"invalid_request_error"`) ||
		!strings.Contains(e.RawJSON(), "tool_choice") {
		t.Errorf("unknown named tool: %v", err)
	}
}

func TestAnthropicThinkingAndStops(t *testing.T) {
	s := startScripted(t, Options{})
	c := s.anthropicClient("unused")
	ctx := context.Background()
	p := anthParams("<s_think>")
	p.Tools = nil
	msg, err := c.Messages.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking != "The user wants a number.\nSo: 42." ||
		msg.Content[1].Text != "It is 42." || msg.StopReason != "end_turn" {
		t.Fatalf("message %+v", msg)
	}
	stream := c.Messages.NewStreaming(ctx, p)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 2 || acc.Content[0].Thinking != msg.Content[0].Thinking || acc.Content[1].Text != "It is 42." {
		t.Errorf("streamed %+v", acc.Content)
	}

	// stop_sequences end the answer as stop_sequence, naming it.
	p = anthParams("<s_plain>")
	p.StopSequences = []string{"wor"}
	msg, err = c.Messages.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "stop_sequence" || msg.StopSequence != "wor" || msg.Content[0].Text != "Hello " {
		t.Errorf("stop sequence: %q %q %q", msg.StopReason, msg.StopSequence, msg.Content[0].Text)
	}
	p.StopSequences = nil
	p.MaxTokens = 1
	msg, err = c.Messages.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "max_tokens" || msg.Content[0].Text != "Hello" {
		t.Errorf("max_tokens: %q %q", msg.StopReason, msg.Content[0].Text)
	}
	// A system prompt as blocks is accepted.
	p.System = []anthropic.TextBlockParam{{Text: "Be brief."}}
	if _, err := c.Messages.New(ctx, p); err != nil {
		t.Errorf("system blocks: %v", err)
	}
	// max_tokens is required.
	status, body := s.post(t, "/v1/messages", `{"model":"scripted","messages":[{"role":"user","content":"<s_plain>"}]}`)
	e, _ := body["error"].(map[string]any)
	if status != 400 || body["type"] != "error" || e["type"] != "invalid_request_error" || !strings.Contains(e["message"].(string), "max_tokens") {
		t.Errorf("missing max_tokens: %d %v", status, body)
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
