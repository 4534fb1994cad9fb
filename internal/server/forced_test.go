package server

import (
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The tools of the forced-call tests: bounded strings (bare in
// qwen3_coder, <|"|>-quoted in gemma4), an enum, an integer range, a
// nested object and an array, so that a model writing at random finishes
// well inside max_tokens.
var forcedToolSchemas = map[string]string{
	"get_weather": `{"type":"object","properties":{"city":{"type":"string","maxLength":10},"unit":{"type":"string","enum":["c","f"]}},"required":["city","unit"]}`,
	"count":       `{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9}},"required":["n"]}`,
	"find":        `{"type":"object","properties":{"q":{"type":"string","maxLength":6},"opts":{"type":"object","properties":{"lang":{"enum":["en","fr"]},"tags":{"type":"array","items":{"type":"string","maxLength":3},"maxItems":2}},"required":["lang"]},"exact":{"type":"boolean"}},"required":["q","opts"]}`,
}

// TestForcedCallSyntaxesSampled: in every call syntax, a tiny random
// model sampling at temperature 1 under tool_choice "required" or a named
// function (through Chat Completions, Responses and Messages) always
// answers with calls, parsed by that syntax's parser, of offered tools
// whose arguments validate: 1 to maxForcedCalls of them for "required"
// with parallel calls allowed (one in harmony), else exactly one.
func TestForcedCallSyntaxesSampled(t *testing.T) {
	refs := map[string]*jsonschema.Schema{}
	var chatTools, anthTools []any
	for _, name := range []string{"get_weather", "count", "find"} {
		schema := json.RawMessage(forcedToolSchemas[name])
		refs[name] = compileReference(t, forcedToolSchemas[name])
		chatTools = append(chatTools, map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": schema}})
		anthTools = append(anthTools, map[string]any{"name": name, "input_schema": schema})
	}
	for _, c := range []struct{ parser, reasoning, model string }{
		{"qwen3_coder", "", "qwen3-bf16"},
		{"mistral", "", "mixtral-bf16"},
		{"gemma4", "", "gemma4-bf16"},
		{"harmony", "harmony", "gpt_oss-bf16"},
		{"hermes", "", "llama-bf16"},
		{"llama3_json", "", "llama-bf16"},
	} {
		t.Run(c.parser, func(t *testing.T) {
			s := startServer(t, loadModel(t, fixture(c.model)), Options{Agent: AgentOptions{ToolCallParser: c.parser, ReasoningParser: c.reasoning}})
			several := 0
			for seed := range 24 {
				named := seed%2 == 1
				parallel := seed%4 == 0
				calls := forcedSample(t, s, seed, named, parallel, chatTools, anthTools)
				most := 1
				if parallel && c.parser != "harmony" {
					most = maxForcedCalls
				}
				if len(calls) < 1 || len(calls) > most {
					t.Fatalf("seed %d: %d calls, want 1 to %d", seed, len(calls), most)
				}
				if len(calls) > 1 {
					several++
				}
				for _, call := range calls {
					ref := refs[call[0]]
					if ref == nil || (named && call[0] != "find") {
						t.Fatalf("seed %d: called %q", seed, call[0])
					}
					if err := validates(ref, call[1]); err != nil {
						t.Fatalf("seed %d: %s arguments %s do not validate: %v", seed, call[0], call[1], err)
					}
				}
				t.Logf("seed %d (parallel %v): %v", seed, parallel, calls)
			}
			t.Logf("%d answers with several calls", several)
		})
	}
}

// forcedSample asks for a forced call through the API seed picks (Chat
// Completions, Responses, Messages) and returns the answer's calls as
// name and arguments.
func forcedSample(t *testing.T, s *testServer, seed int, named, parallel bool, chatTools, anthTools []any) [][2]string {
	t.Helper()
	msgs := []map[string]any{{"role": "user", "content": "Weather in Paris?"}}
	var out [][2]string
	switch seed % 3 {
	case 0:
		choice := any("required")
		if named {
			choice = map[string]any{"type": "function", "function": map[string]any{"name": "find"}}
		}
		code, body := s.post(t, "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 600,
			"temperature": 1, "seed": seed, "tools": chatTools, "tool_choice": choice, "parallel_tool_calls": parallel})
		ch := body["choices"].([]any)[0].(map[string]any)
		calls, _ := ch["message"].(map[string]any)["tool_calls"].([]any)
		if code != 200 || ch["finish_reason"] != "tool_calls" {
			t.Fatalf("seed %d: status %d, %v", seed, code, body)
		}
		for _, c := range calls {
			fn := c.(map[string]any)["function"].(map[string]any)
			out = append(out, [2]string{fn["name"].(string), fn["arguments"].(string)})
		}
	case 1:
		choice := any("required")
		if named {
			choice = map[string]any{"type": "function", "name": "find"}
		}
		code, body := s.post(t, "/v1/responses", map[string]any{"input": "Weather in Paris?", "max_output_tokens": 600,
			"temperature": 1, "seed": seed, "tools": respTools(chatTools), "tool_choice": choice, "parallel_tool_calls": parallel})
		if code != 200 {
			t.Fatalf("seed %d: status %d, %v", seed, code, body)
		}
		for _, it := range body["output"].([]any) {
			if item := it.(map[string]any); item["type"] == "function_call" {
				out = append(out, [2]string{item["name"].(string), item["arguments"].(string)})
			}
		}
	default:
		choice := map[string]any{"type": "any", "disable_parallel_tool_use": !parallel}
		if named {
			choice = map[string]any{"type": "tool", "name": "find", "disable_parallel_tool_use": !parallel}
		}
		code, body := s.post(t, "/v1/messages", map[string]any{"messages": msgs, "max_tokens": 600,
			"temperature": 1, "tools": anthTools, "tool_choice": choice})
		if code != 200 || body["stop_reason"] != "tool_use" {
			t.Fatalf("seed %d: status %d, %v", seed, code, body)
		}
		for _, b := range body["content"].([]any) {
			if blk := b.(map[string]any); blk["type"] == "tool_use" {
				in, _ := json.Marshal(blk["input"])
				out = append(out, [2]string{blk["name"].(string), string(in)})
			}
		}
	}
	return out
}

// respTools are chat tools in the Responses API's flat shape.
func respTools(chat []any) []any {
	out := make([]any, len(chat))
	for i, t := range chat {
		fn := t.(map[string]any)["function"].(map[string]any)
		out[i] = map[string]any{"type": "function", "name": fn["name"], "parameters": fn["parameters"]}
	}
	return out
}
