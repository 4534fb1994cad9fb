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
// answers with one call, parsed by that syntax's parser, of an offered
// tool whose arguments validate.
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
	} {
		t.Run(c.parser, func(t *testing.T) {
			s := startServer(t, loadModel(t, fixture(c.model)), Options{Agent: AgentOptions{ToolCallParser: c.parser, ReasoningParser: c.reasoning}})
			for seed := range 24 {
				named := seed%2 == 1
				msgs := []map[string]any{{"role": "user", "content": "Weather in Paris?"}}
				var name, args string
				switch seed % 3 {
				case 0:
					choice := any("required")
					if named {
						choice = map[string]any{"type": "function", "function": map[string]any{"name": "find"}}
					}
					code, body := s.post(t, "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 300,
						"temperature": 1, "seed": seed, "tools": chatTools, "tool_choice": choice})
					ch := body["choices"].([]any)[0].(map[string]any)
					calls, _ := ch["message"].(map[string]any)["tool_calls"].([]any)
					if code != 200 || ch["finish_reason"] != "tool_calls" || len(calls) != 1 {
						t.Fatalf("seed %d: status %d, %v", seed, code, body)
					}
					fn := calls[0].(map[string]any)["function"].(map[string]any)
					name, args = fn["name"].(string), fn["arguments"].(string)
				case 1:
					choice := any("required")
					if named {
						choice = map[string]any{"type": "function", "name": "find"}
					}
					code, body := s.post(t, "/v1/responses", map[string]any{"input": "Weather in Paris?", "max_output_tokens": 300,
						"temperature": 1, "seed": seed, "tools": respTools(chatTools), "tool_choice": choice})
					var calls []map[string]any
					for _, it := range body["output"].([]any) {
						if item := it.(map[string]any); item["type"] == "function_call" {
							calls = append(calls, item)
						}
					}
					if code != 200 || len(calls) != 1 {
						t.Fatalf("seed %d: status %d, %v", seed, code, body)
					}
					name, args = calls[0]["name"].(string), calls[0]["arguments"].(string)
				default:
					choice := map[string]any{"type": "any"}
					if named {
						choice = map[string]any{"type": "tool", "name": "find"}
					}
					code, body := s.post(t, "/v1/messages", map[string]any{"messages": msgs, "max_tokens": 300,
						"temperature": 1, "tools": anthTools, "tool_choice": choice})
					var uses []map[string]any
					for _, b := range body["content"].([]any) {
						if blk := b.(map[string]any); blk["type"] == "tool_use" {
							uses = append(uses, blk)
						}
					}
					if code != 200 || body["stop_reason"] != "tool_use" || len(uses) != 1 {
						t.Fatalf("seed %d: status %d, %v", seed, code, body)
					}
					in, _ := json.Marshal(uses[0]["input"])
					name, args = uses[0]["name"].(string), string(in)
				}
				ref := refs[name]
				if ref == nil || (named && name != "find") {
					t.Fatalf("seed %d: called %q", seed, name)
				}
				if err := validates(ref, args); err != nil {
					t.Fatalf("seed %d: %s arguments %s do not validate: %v", seed, name, args, err)
				}
				t.Logf("seed %d: %s(%s)", seed, name, args)
			}
		})
	}
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
