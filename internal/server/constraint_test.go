package server

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mlxcel/mlxcel/internal/generate"
)

// The schema of the end-to-end tests: every part bounded (string lengths,
// items, integer range), so that even a model writing at random finishes
// the value well inside stories260k's 512-token context.
const e2eSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "mood": {"enum": ["happy", "sad", "calm"]},
    "pets": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
    "ok": {"type": "boolean"},
    "nick": {"anyOf": [{"type": "null"}, {"type": "string", "pattern": "^[a-z]{1,6}$"}]}
  },
  "required": ["name", "age", "mood", "pets", "ok"],
  "additionalProperties": false
}`

func compileReference(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validates(ref *jsonschema.Schema, text string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return ref.Validate(v)
}

// TestResponseFormatJSONSchemaSampled: stories260k (a story model that
// has never seen JSON) sampling at temperature 1 through the real server
// and the official client answers with JSON that validates against the
// schema, for every seed, streamed or not.
func TestResponseFormatJSONSchemaSampled(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	c := s.client()
	var schema map[string]any
	if err := json.Unmarshal([]byte(e2eSchema), &schema); err != nil {
		t.Fatal(err)
	}
	ref := compileReference(t, e2eSchema)
	rf := openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "pet_owner", Schema: schema, Strict: openai.Bool(true)},
	}}
	for seed := range int64(8) {
		params := openai.ChatCompletionNewParams{
			Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
			MaxTokens:      openai.Int(400),
			Temperature:    openai.Float(1),
			Seed:           openai.Int(seed),
			ResponseFormat: rf,
		}
		var text, finish string
		if seed%2 == 0 {
			resp, err := c.Chat.Completions.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			text, finish = resp.Choices[0].Message.Content, resp.Choices[0].FinishReason
		} else {
			stream := c.Chat.Completions.NewStreaming(context.Background(), params)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			text, finish = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason
		}
		if finish != "stop" {
			t.Fatalf("seed %d: finish %q after %q", seed, finish, text)
		}
		if err := validates(ref, text); err != nil {
			t.Fatalf("seed %d: %q does not validate: %v", seed, text, err)
		}
		t.Logf("seed %d: %s", seed, text)
	}
}

// TestResponseFormatJSONObjectSampled: json_object answers are JSON
// objects. Strings are unbounded there and stories260k writes stories in
// them, often running to max_tokens (finish "length": the text must then
// be a truncated object), so half the requests bias the closing quote and
// brace up and the comma down (logit_bias) to have answers that end: they
// must parse.
func TestResponseFormatJSONObjectSampled(t *testing.T) {
	l := loadModel(t, "")
	s := startServer(t, l, Options{})
	quote, _ := l.Tokenizer.TokenID(`"`)
	brace, _ := l.Tokenizer.TokenID("<0x7D>")
	comma, _ := l.Tokenizer.TokenID(",")
	stopped := 0
	for seed := range 8 {
		req := map[string]any{
			"messages": []map[string]any{{"role": "user", "content": "Hello"}}, "max_tokens": 400,
			"temperature": 1, "seed": seed, "response_format": map[string]any{"type": "json_object"},
		}
		biased := seed%2 == 1
		if biased {
			req["logit_bias"] = map[string]any{strconv.Itoa(int(quote)): 3, strconv.Itoa(int(brace)): 10, strconv.Itoa(int(comma)): -3}
		}
		code, body := s.post(t, "/v1/chat/completions", req)
		if code != 200 {
			t.Fatalf("status %d: %v", code, body)
		}
		ch := body["choices"].([]any)[0].(map[string]any)
		text := ch["message"].(map[string]any)["content"].(string)
		var obj map[string]any
		err := json.Unmarshal([]byte(text), &obj)
		switch ch["finish_reason"] {
		case "stop":
			stopped++
			if err != nil {
				t.Fatalf("seed %d: %q is not a JSON object: %v", seed, text, err)
			}
		case "length":
			if err == nil || !strings.HasPrefix(text, "{") || err.Error() != "unexpected end of JSON input" {
				t.Fatalf("seed %d: %q is not a truncated JSON object (%v)", seed, text, err)
			}
		default:
			t.Fatalf("seed %d: finish %v", seed, ch["finish_reason"])
		}
		t.Logf("seed %d: %v %.120s", seed, ch["finish_reason"], text)
	}
	if stopped < 2 {
		t.Fatalf("only %d answers ended", stopped)
	}
}

// TestResponseFormatErrors: bad response_format values get a 400 in the
// OpenAI error shape naming the parameter.
func TestResponseFormatErrors(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	msgs := []map[string]any{{"role": "user", "content": "Hi"}}
	for _, c := range []struct {
		rf    any
		param string
		text  string
	}{
		{map[string]any{"type": "yaml"}, "response_format.type", "yaml"},
		{"json", "response_format", "must be an object"},
		{map[string]any{"type": "json_schema"}, "response_format.json_schema.schema", "needs"},
		{map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{"type": "object", "patternProperties": map[string]any{}}}},
			"response_format.json_schema.schema", "patternProperties"},
		{map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{"type": "string", "minLength": 3, "maxLength": 2}}},
			"response_format.json_schema.schema", "admits no value"},
	} {
		code, body := s.post(t, "/v1/chat/completions", map[string]any{"messages": msgs, "response_format": c.rf, "max_tokens": 5})
		if code != 400 {
			t.Fatalf("%v: status %d %v", c.rf, code, body)
		}
		e := errorOf(t, body)
		if e["param"] != c.param || !strings.Contains(e["message"].(string), c.text) {
			t.Errorf("%v: error %v, want param %q and %q in the message", c.rf, e, c.param, c.text)
		}
	}
	code, body := s.post(t, "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 3, "response_format": map[string]any{"type": "text"}})
	if code != 200 {
		t.Fatalf("text: status %d %v", code, body)
	}
}

// TestToolChoiceForcedSampled: with tool_choice "required" or a named
// function, stories260k at temperature 1 (Hermes syntax forced with
// --tool-call-parser) always answers with a parsed call of an offered
// tool whose arguments validate against its parameters (one: parallel
// calls off; TestForcedCallSyntaxesSampled has them on).
func TestToolChoiceForcedSampled(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{Agent: AgentOptions{ToolCallParser: "hermes"}})
	weather := `{"type":"object","properties":{"city":{"type":"string","maxLength":10},"unit":{"enum":["c","f"]}},"required":["city","unit"]}`
	count := `{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9}},"required":["n"]}`
	refs := map[string]*jsonschema.Schema{"get_weather": compileReference(t, weather), "count": compileReference(t, count)}
	tool := func(name, params string) map[string]any {
		return map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": json.RawMessage(params)}}
	}
	tools := []any{tool("get_weather", weather), tool("count", count)}
	for seed := range 6 {
		choice := any("required")
		if seed >= 3 {
			choice = map[string]any{"type": "function", "function": map[string]any{"name": "count"}}
		}
		code, body := s.post(t, "/v1/chat/completions", map[string]any{
			"messages": []map[string]any{{"role": "user", "content": "Weather?"}}, "max_tokens": 200,
			"temperature": 1, "seed": seed, "tools": tools, "tool_choice": choice, "parallel_tool_calls": false,
		})
		if code != 200 {
			t.Fatalf("status %d: %v", code, body)
		}
		ch := body["choices"].([]any)[0].(map[string]any)
		calls, _ := ch["message"].(map[string]any)["tool_calls"].([]any)
		if ch["finish_reason"] != "tool_calls" || len(calls) != 1 {
			t.Fatalf("seed %d: finish %v, message %v", seed, ch["finish_reason"], ch["message"])
		}
		fn := calls[0].(map[string]any)["function"].(map[string]any)
		name, args := fn["name"].(string), fn["arguments"].(string)
		ref := refs[name]
		if ref == nil || (seed >= 3 && name != "count") {
			t.Fatalf("seed %d: called %q", seed, name)
		}
		if err := validates(ref, args); err != nil {
			t.Fatalf("seed %d: %s arguments %s do not validate: %v", seed, name, args, err)
		}
		t.Logf("seed %d: %s(%s)", seed, name, args)
	}
	code, body := s.post(t, "/v1/chat/completions", map[string]any{
		"messages": []map[string]any{{"role": "user", "content": "Hi"}}, "max_tokens": 5,
		"tools": []any{tool("bad", `{"type":"object","properties":{"x":{"not":{}}}}`)}, "tool_choice": "required",
	})
	if e := errorOf(t, body); code != 400 || e["param"] != "tool_choice" {
		t.Fatalf("an unenforceable tool schema: status %d %v", code, body)
	}
}

// TestResponseFormatChoices: n choices of one constrained request each
// follow the schema (each its own matcher).
func TestResponseFormatChoices(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	ref := compileReference(t, e2eSchema)
	code, body := s.post(t, "/v1/chat/completions", map[string]any{
		"messages": []map[string]any{{"role": "user", "content": "Hi"}}, "max_tokens": 300, "temperature": 1, "seed": 5, "n": 3,
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": json.RawMessage(e2eSchema)}},
	})
	if code != 200 {
		t.Fatalf("status %d: %v", code, body)
	}
	choices := body["choices"].([]any)
	if len(choices) != 3 {
		t.Fatalf("%d choices", len(choices))
	}
	seen := map[string]bool{}
	for i, c := range choices {
		ch := c.(map[string]any)
		text := ch["message"].(map[string]any)["content"].(string)
		if ch["finish_reason"] != "stop" {
			t.Fatalf("choice %d: finish %v", i, ch["finish_reason"])
		}
		if err := validates(ref, text); err != nil {
			t.Fatalf("choice %d: %q: %v", i, text, err)
		}
		seen[text] = true
	}
	if len(seen) < 2 {
		t.Fatalf("the choices are all the same: %v", seen)
	}
}

// TestResponsesTextFormat: the Responses API's text.format json_schema
// reaches the same constraint (through the chat request it becomes).
func TestResponsesTextFormat(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	ref := compileReference(t, e2eSchema)
	for seed := range 3 {
		code, body := s.post(t, "/v1/responses", map[string]any{
			"input": "Once upon a time", "max_output_tokens": 300, "temperature": 1, "seed": seed,
			"text": map[string]any{"format": map[string]any{"type": "json_schema", "name": "x", "schema": json.RawMessage(e2eSchema), "strict": true}},
		})
		if code != 200 {
			t.Fatalf("status %d: %v", code, body)
		}
		out := body["output"].([]any)
		msg := out[len(out)-1].(map[string]any)
		text := msg["content"].([]any)[0].(map[string]any)["text"].(string)
		if err := validates(ref, text); err != nil {
			t.Fatalf("seed %d: %q: %v", seed, text, err)
		}
	}
}

// TestConstraintAfterThought: with a <think> reasoning parser the value
// may follow a thought; when the prompt opened the thought, the answer
// is inside it until </think>, so a bare value is thought text there and
// cannot end the answer.
func TestConstraintAfterThought(t *testing.T) {
	l := loadModel(t, "")
	s := startServer(t, l, Options{Agent: AgentOptions{ReasoningParser: "think"}})
	m := s.model()
	rf := json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}`)
	eos := m.stopIDs[0]
	ends := func(prompt, answer string) bool {
		var greq generate.Request
		if e := m.constrain(&greq, rf, toolChoice{mode: "auto"}, nil, true, prompt); e != nil {
			t.Fatal(e)
		}
		ids, err := l.Tokenizer.Encode(answer, false)
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[1:] // the SentencePiece normalizer's leading "▁"
		mask := make([]uint64, (m.vocab+63)/64)
		c := greq.Constraint
		for _, id := range ids {
			if err := c.Mask(mask); err != nil || mask[id/64]&(1<<(id%64)) == 0 {
				t.Fatalf("%q after %q: token %d refused (%v)", answer, prompt, id, err)
			}
			if err := c.Accept(id); err != nil {
				t.Fatal(err)
			}
		}
		c.Mask(mask)
		return mask[eos/64]&(1<<(eos%64)) != 0
	}
	if !ends("User: hi\nAssistant:", `{"a":1}`) || !ends("User: hi\nAssistant:", "<think>hm</think>\n\n{\"a\":1}") {
		t.Fatal("a value (after an optional thought) does not end the answer")
	}
	if ends("Assistant: <think>\n", `{"a":1}`) {
		t.Fatal("inside an opened thought a value ended the answer")
	}
	if !ends("Assistant: <think>\n", "so {\"a\":1}\n</think>\n\n{\"a\":1}") {
		t.Fatal("the value after the opened thought does not end the answer")
	}
}
