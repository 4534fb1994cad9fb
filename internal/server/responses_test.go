package server

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

func respParams(trigger string, tools bool) responses.ResponseNewParams {
	p := responses.ResponseNewParams{
		Model:           "scripted",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(trigger)},
		Temperature:     openai.Float(0),
		MaxOutputTokens: openai.Int(40),
	}
	if tools {
		p.Tools = []responses.ToolUnionParam{
			responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object",
				"properties": map[string]any{"city": map[string]any{"type": "string"}}}, false),
			responses.ToolParamOfFunction("get_time", map[string]any{"type": "object", "properties": map[string]any{}}, false),
		}
	}
	return p
}

// TestSDKResponses: client.responses.create and the event stream of the
// official SDK, with function calls, reasoning and previous_response_id.
func TestSDKResponses(t *testing.T) {
	s := startScripted(t, Options{})
	c := s.client()
	ctx := context.Background()
	resp, err := c.Responses.New(ctx, respParams("<s_tool>", true))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "completed" || !strings.HasPrefix(resp.ID, "resp_") || len(resp.Output) != 3 {
		t.Fatalf("response %s %+v", resp.Status, resp.Output)
	}
	if resp.OutputText() != "Let me check." || resp.Output[0].Type != "message" {
		t.Errorf("output text %q, item 0 %q", resp.OutputText(), resp.Output[0].Type)
	}
	want := [][2]string{{"get_weather", `{"city": "Paris", "days": 3}`}, {"get_time", `{}`}}
	for i, w := range want {
		fc := resp.Output[i+1].AsFunctionCall()
		if resp.Output[i+1].Type != "function_call" || fc.Name != w[0] || fc.Arguments != w[1] || !strings.HasPrefix(fc.CallID, "call_") {
			t.Errorf("item %d: %+v", i+1, fc)
		}
	}
	if resp.Usage.OutputTokens != int64(len(scripts["<s_tool>"])+1) || resp.Usage.InputTokens == 0 {
		t.Errorf("usage %+v", resp.Usage)
	}

	// The stream: created first, completed last with the same output;
	// text and arguments deltas add up.
	stream := c.Responses.NewStreaming(ctx, respParams("<s_tool>", true))
	var types []string
	var text, args strings.Builder
	var final responses.Response
	seq := int64(-1)
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.SequenceNumber != seq+1 {
			t.Errorf("sequence %d after %d", ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			args.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) < 10 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Errorf("event types %v", types)
	}
	if text.String() != "Let me check." || args.String() != `{"city": "Paris", "days": 3}{}` {
		t.Errorf("deltas: text %q args %q", text.String(), args.String())
	}
	if final.Status != "completed" || len(final.Output) != 3 || final.Output[1].AsFunctionCall().Name != "get_weather" {
		t.Errorf("completed response %+v", final.Output)
	}

	// Continue from the stored response with the tools' outputs.
	calls := []responses.ResponseInputItemUnionParam{}
	for _, it := range resp.Output[1:] {
		out := responses.ResponseInputItemParamOfFunctionCallOutput("ok")
		out.OfFunctionCallOutput.CallID = openai.String(it.AsFunctionCall().CallID)
		calls = append(calls, out)
	}
	calls = append(calls, responses.ResponseInputItemParamOfMessage("<s_plain>", responses.EasyInputMessageRoleUser))
	next, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "scripted", PreviousResponseID: openai.String(resp.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: calls}, Temperature: openai.Float(0)})
	if err != nil {
		t.Fatal(err)
	}
	alone, err := c.Responses.New(ctx, respParams("<s_plain>", false))
	if err != nil {
		t.Fatal(err)
	}
	// The stored turns (the question, the calls, their outputs) came first.
	if next.OutputText() != "Hello world" || next.Usage.InputTokens <= alone.Usage.InputTokens+10 {
		t.Errorf("continued: %q, input tokens %d, %d without the history", next.OutputText(), next.Usage.InputTokens, alone.Usage.InputTokens)
	}
	got, err := c.Responses.Get(ctx, next.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != "Hello world" {
		t.Errorf("GET: %v %+v", err, got)
	}
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "scripted", PreviousResponseID: openai.String("resp_nope"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("<s_plain>")}})
	var apiErr *openai.Error
	if !asAPIError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "previous_response_id" {
		t.Errorf("unknown previous_response_id: %v", err)
	}

	// Reasoning comes back as a reasoning item.
	resp, err = c.Responses.New(ctx, respParams("<s_think>", false))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 2 || resp.Output[0].Type != "reasoning" || resp.OutputText() != "It is 42." {
		t.Fatalf("reasoning response %+v", resp.Output)
	}
	if r := resp.Output[0].AsReasoning(); len(r.Content) != 1 || r.Content[0].Text != "The user wants a number.\nSo: 42." {
		t.Errorf("reasoning item %+v", r)
	}
	// max_output_tokens cuts the answer: incomplete.
	p := respParams("<s_plain>", false)
	p.MaxOutputTokens = openai.Int(1)
	resp, err = c.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "max_output_tokens" || resp.OutputText() != "Hello" {
		t.Errorf("incomplete: %s %+v %q", resp.Status, resp.IncompleteDetails, resp.OutputText())
	}
}

// TestResponsesMessagesBadInput: 400s in each API's own error shape,
// naming the parameter.
func TestResponsesMessagesBadInput(t *testing.T) {
	s := startScripted(t, Options{})
	for _, c := range []struct{ name, body, param string }{
		{"no input", `{"model":"scripted"}`, "input"},
		{"input a number", `{"input":7}`, "input"},
		{"server tool", `{"input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{"function without name", `{"input":"x","tools":[{"type":"function","parameters":{}}]}`, "tools[0].name"},
		{"unknown item", `{"input":[{"type":"image_generation_call"}]}`, "input[0].type"},
		{"image part", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0].type"},
		{"named tool not offered", `{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, "tool_choice"},
	} {
		status, body := s.post(t, "/v1/responses", c.body)
		if e := errorOf(t, body); status != 400 || e["param"] != c.param {
			t.Errorf("responses %s: %d %v", c.name, status, body)
		}
	}
	for _, c := range []struct{ name, body, mention string }{
		{"no max_tokens", `{"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"tool without schema", `{"max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f"}]}`, "tools[0].input_schema"},
		{"image block", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, "messages[0].content[0].type"},
		{"bad role", `{"max_tokens":5,"messages":[{"role":"system","content":"x"}]}`, "messages[0].role"},
		{"bad tool_choice", `{"max_tokens":5,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"sometimes"}}`, "tool_choice.type"},
		{"bad thinking", `{"max_tokens":5,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"maybe"}}`, "thinking.type"},
	} {
		status, body := s.post(t, "/v1/messages", c.body)
		e, _ := body["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if status != 400 || body["type"] != "error" || e["type"] != "invalid_request_error" || !strings.Contains(msg, c.mention) {
			t.Errorf("messages %s: %d %v", c.name, status, body)
		}
	}
}
