package toolcall

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/reasoning"
)

const shared = "../../../shared/testdata/templates/"

// renderAnswer renders a conversation ending in an assistant turn with
// the real template and returns what the template wrote for that turn:
// the text a model trained on the template generates.
func renderAnswer(t *testing.T, path, eos string, assistant chat.Message, extra map[string]any) (prompt, answer string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Parse(string(src), "<bos>", eos)
	if err != nil {
		t.Fatal(err)
	}
	user := []chat.Message{{Role: "user", Content: "What is the weather in Paris and in Rome?"}}
	prompt, err = tmpl.Render(user, true, extra)
	if err != nil {
		t.Fatal(err)
	}
	full, err := tmpl.Render(append(user, assistant), false, extra)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(full, prompt) {
		t.Fatalf("the conversation does not extend the prompt:\n%q\n%q", prompt, full)
	}
	return prompt, full[len(prompt):]
}

func toolCall(name string, args string) map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{"name": name, "arguments": json.RawMessage(args)}}
}

var weatherTools = map[string]any{"tools": json.RawMessage(`[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}]`)}

// sameJSON compares two JSON texts as values.
func sameJSON(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Errorf("arguments %q are not JSON: %v", got, err)
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(g, w)
}

func TestTemplateOutputs(t *testing.T) {
	two := chat.Message{Role: "assistant", Content: "", ToolCalls: []map[string]any{
		toolCall("get_weather", `{"city": "Paris", "days": 3}`),
		toolCall("get_weather", `{"city": "Rome", "note": "a \"quoted\" {brace}"}`),
	}}
	one := chat.Message{Role: "assistant", Content: nil, ToolCalls: []map[string]any{toolCall("get_weather", `{"city": "Paris", "days": 3}`)}}
	cases := []struct {
		name, parser, path, eos, endTurn string
		msg                              chat.Message
		want                             []Call
	}{
		{"qwen3", "hermes", shared + "qwen3.jinja", "<|im_end|>", "<|im_end|>\n", two, []Call{
			{"get_weather", `{"city": "Paris", "days": 3}`}, {"get_weather", `{"city": "Rome", "note": "a \"quoted\" {brace}"}`}}},
		{"qwen2.5", "hermes", shared + "qwen2_5.jinja", "<|im_end|>", "<|im_end|>\n", two, []Call{
			{"get_weather", `{"city": "Paris", "days": 3}`}, {"get_weather", `{"city": "Rome", "note": "a \"quoted\" {brace}"}`}}},
		{"llama3.1", "llama3_json", shared + "llama3_1.jinja", "<|eot_id|>", "<|eot_id|>", one, []Call{
			{"get_weather", `{"city": "Paris", "days": 3}`}}},
		{"ministral3", "mistral", "testdata/ministral3.jinja", "</s>", "</s>", two, []Call{
			{"get_weather", `{"city": "Paris", "days": 3}`}, {"get_weather", `{"city": "Rome", "note": "a \"quoted\" {brace}"}`}}},
		{"qwen3.5", "qwen3_coder", "testdata/qwen3_5.jinja", "<|im_end|>", "<|im_end|>\n", two, []Call{
			{"get_weather", `{"city": "Paris", "days": 3}`}, {"get_weather", `{"city": "Rome", "note": "a \"quoted\" {brace}"}`}}},
		{"gemma4", "gemma4", "testdata/gemma4.jinja", "<eos>", "", two, []Call{
			{"get_weather", `{"city": "Paris", "days": 3}`}, {"get_weather", `{"city": "Rome", "note": "a \"quoted\" {brace}"}`}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, _ := os.ReadFile(c.path)
			if got := Detect(string(src), ""); got != c.parser {
				t.Errorf("Detect on the template: %q, want %q", got, c.parser)
			}
			extra := weatherTools
			if c.parser == "gemma4" {
				// Without thinking the generation prompt ends in an empty
				// thought that the rendered turn does not repeat.
				extra = map[string]any{"tools": weatherTools["tools"], "enable_thinking": true}
			}
			prompt, text := renderAnswer(t, c.path, c.eos, c.msg, extra)
			text = strings.TrimSuffix(text, c.endTurn)
			if c.parser == "hermes" || c.parser == "qwen3_coder" {
				// Qwen 3 writes an empty thought first: the server splits
				// reasoning off before it looks for calls.
				_, text, _ = reasoning.Split("think", text, reasoning.OpenedIn("think", prompt))
			}
			t.Logf("model text: %q", text)
			content, calls, err := parseTyped(c.parser, text)
			if err != nil {
				t.Fatal(err)
			}
			if content != "" {
				t.Errorf("content %q, want none", content)
			}
			checkCalls(t, calls, c.want)
			checkSplits(t, c.parser, text)
		})
	}
}

func checkCalls(t *testing.T, got, want []Call) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d calls %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || !sameJSON(t, got[i].Arguments, want[i].Arguments) {
			t.Errorf("call %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// checkSplits feeds text cut at every byte, and at random points, and
// requires the same content and calls as the whole-text parse, with each
// call's name announced before any of its arguments.
func checkSplits(t *testing.T, parser, text string) {
	t.Helper()
	wantContent, wantCalls, _ := Parse(parser, text)
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		s, _ := NewStream(parser)
		var evs []Event
		for rest := text; rest != ""; {
			n := 1
			if trial > 0 {
				n = 1 + rng.IntN(8)
			}
			n = min(n, len(rest))
			evs = append(evs, s.Push(rest[:n])...)
			rest = rest[n:]
		}
		evs = append(evs, s.Close()...)
		started := map[int]bool{}
		for _, ev := range evs {
			switch ev.Kind {
			case Start:
				started[ev.Index] = true
			case Args:
				if !started[ev.Index] {
					t.Fatalf("arguments of call %d before its name", ev.Index)
				}
			}
		}
		content, calls := Collect(evs)
		if content != wantContent || !reflect.DeepEqual(calls, wantCalls) {
			t.Fatalf("trial %d streamed content %q calls %+v; whole text: %q %+v", trial, content, calls, wantContent, wantCalls)
		}
	}
}

func TestContentAndCalls(t *testing.T) {
	cases := []struct {
		parser, text, content string
		calls                 []Call
	}{
		// Qwen 3 writes content, a blank line, then the call.
		{"hermes", "Let me check.\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": [1, {\"y\": \"}\"}]}}\n</tool_call>", "Let me check.",
			[]Call{{"f", `{"x": [1, {"y": "}"}]}`}}},
		// No call: every byte of the answer is content.
		{"hermes", "  Plain answer with a < sign and <tool\n\n", "  Plain answer with a < sign and <tool\n\n", nil},
		// Markup that is no call stays content.
		{"hermes", "<tool_call>not json</tool_call> done", "<tool_call>not json</tool_call> done", nil},
		// Arguments as a JSON string, and before the name.
		{"hermes", `<tool_call>{"arguments": "{\"a\": 1}", "name": "g"}</tool_call>`, "", []Call{{"g", `{"a": 1}`}}},
		{"hermes", `<tool_call>{"arguments": {"a": 1}, "name": "g"}</tool_call>`, "", []Call{{"g", `{"a": 1}`}}},
		// No arguments at all.
		{"hermes", `<tool_call>{"name": "now"}</tool_call>`, "", []Call{{"now", `{}`}}},
		// Cut off by the length limit: the partial arguments are kept.
		{"hermes", `<tool_call>{"name": "f", "arguments": {"a": `, "", []Call{{"f", `{"a": `}}},
		{"llama3_json", `<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"k": true}}`, "",
			[]Call{{"a", `{}`}, {"b", `{"k": true}`}}},
		{"llama3_json", `The answer is {"name": "x"}`, `The answer is {"name": "x"}`, nil},
		{"llama3_json", `<|python_tag|>wolfram_alpha.call(query="2+2", n=3)`, "", []Call{{"wolfram_alpha", `{"query": "2+2", "n": 3}`}}},
		{"llama3_json", `<|python_tag|>print("hi")`, `<|python_tag|>print("hi")`, nil},
		{"llama3_json", `{"result": 42}`, `{"result": 42}`, nil},
		{"mistral", `[TOOL_CALLS] [{"name": "a", "arguments": {"q": 1}}, {"name": "b", "arguments": {}}]`, "",
			[]Call{{"a", `{"q": 1}`}, {"b", `{}`}}},
		{"mistral", `Sure.[TOOL_CALLS]a[CALL_ID]abc123456[ARGS]{"q": 1}`, "Sure.", []Call{{"a", `{"q": 1}`}}},
		{"gemma4", `<|tool_call>call:f{flag:true,list:[1,<|"|>b<|"|>],n:-2.5,obj:{k:<|"|>v, w<|"|>},word:hi}<tool_call|><|tool_response>`, "",
			[]Call{{"f", `{"flag": true, "list": [1, "b"], "n": -2.5, "obj": {"k": "v, w"}, "word": "hi"}`}}},
	}
	for _, c := range cases {
		content, calls, err := Parse(c.parser, c.text)
		if err != nil {
			t.Fatal(err)
		}
		if content != c.content || !reflect.DeepEqual(calls, c.calls) {
			t.Errorf("%s %q:\n got %q %+v\nwant %q %+v", c.parser, c.text, content, calls, c.content, c.calls)
		}
		checkSplits(t, c.parser, c.text)
	}
}

// TestHoldsMarkupBack: text that may start the markup is not emitted
// until it is known not to.
func TestHoldsMarkupBack(t *testing.T) {
	s, _ := NewStream("hermes")
	if evs := s.Push("Hi <tool_"); len(evs) != 1 || evs[0].Text != "Hi" {
		t.Fatalf("first push: %+v", evs)
	}
	evs := s.Push("call>{\"name\": \"get_weather\", \"arguments\": {\"ci")
	if len(evs) != 2 || evs[0].Kind != Start || evs[0].Name != "get_weather" || evs[1].Kind != Args || evs[1].Text != `{"ci` {
		t.Fatalf("second push: %+v", evs)
	}
	evs = s.Push("ty\": 1}}\n</tool_call>")
	if len(evs) != 1 || evs[0].Text != `ty": 1}` {
		t.Fatalf("third push: %+v", evs)
	}
	if evs := s.Close(); len(evs) != 0 {
		t.Fatalf("close: %+v", evs)
	}
}

func TestDetectModelType(t *testing.T) {
	for mt, want := range map[string]string{"qwen3": "hermes", "qwen2": "hermes", "llama": "llama3_json", "mixtral": "mistral", "gemma4": "gemma4", "gpt2": ""} {
		if got := Detect("", mt); got != want {
			t.Errorf("%s: %q, want %q", mt, got, want)
		}
	}
}

// parseTyped parses with the weather tool's schema given (qwen3_coder
// reads parameter types from it).
func parseTyped(parser, text string) (string, []Call, error) {
	s, err := NewStream(parser)
	if err != nil {
		return "", nil, err
	}
	s.Schemas(map[string]json.RawMessage{"get_weather": json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`)})
	content, calls := Collect(append(s.Push(text), s.Close()...))
	return content, calls, nil
}

// TestQwenXMLValues: without a schema a value is read by its look; with
// one, by the parameter's type.
func TestQwenXMLValues(t *testing.T) {
	text := "<tool_call>\n<function=f>\n<parameter=zip>\n01234\n</parameter>\n<parameter=n>\n3\n</parameter>\n" +
		"<parameter=ok>\nTrue\n</parameter>\n<parameter=list>\n[1, \"a\"]\n</parameter>\n<parameter=text>\ntwo\nlines\n</parameter>\n</function>\n</tool_call>"
	_, calls, _ := Parse("qwen3_coder", text)
	if len(calls) != 1 || calls[0].Arguments != `{"zip": "01234", "n": 3, "ok": true, "list": [1, "a"], "text": "two\nlines"}` {
		t.Errorf("untyped: %+v", calls)
	}
	s, _ := NewStream("qwen3_coder")
	s.Schemas(map[string]json.RawMessage{"f": json.RawMessage(`{"properties":{"n":{"type":"string"},"zip":{"type":"string"}}}`)})
	_, calls = Collect(append(s.Push(text), s.Close()...))
	if len(calls) != 1 || calls[0].Arguments != `{"zip": "01234", "n": "3", "ok": true, "list": [1, "a"], "text": "two\nlines"}` {
		t.Errorf("typed: %+v", calls)
	}
	checkSplits(t, "qwen3_coder", text)
	checkSplits(t, "qwen3_coder", "Sure.\n\n"+text+"\n<tool_call>\n<function=g>\n</function>\n</tool_call>")
	if c, calls, _ := Parse("qwen3_coder", "<tool_call>oops</tool_call>"); c != "<tool_call>oops</tool_call>" || len(calls) != 0 {
		t.Errorf("not a call: %q %+v", c, calls)
	}
	// The Hermes JSON form inside the same tags is read too.
	hermesForm := "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"n\": 1}}\n</tool_call>"
	if c, calls, _ := Parse("qwen3_coder", hermesForm); c != "" || len(calls) != 1 || calls[0].Arguments != `{"n": 1}` {
		t.Errorf("hermes form: %q %+v", c, calls)
	}
	checkSplits(t, "qwen3_coder", hermesForm)
}

// TestLlamaBuiltinTools: the Llama 3.1 template's built-in tool call form
// (the golden conversation of internal/chat/testdata rendered by jinja2).
func TestLlamaBuiltinTools(t *testing.T) {
	b, err := os.ReadFile("../chat/testdata/extra.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			Name     string
			Rendered string
		}
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	for _, c := range golden.Cases {
		if c.Name != "llama3_1/builtin_tools" {
			continue
		}
		start := strings.Index(c.Rendered, pythonTag)
		end := strings.Index(c.Rendered, "<|eom_id|>")
		if start < 0 || end < start {
			t.Fatalf("no built-in call in %q", c.Rendered)
		}
		text := c.Rendered[start:end]
		content, calls, _ := Parse("llama3_json", text)
		if content != "" || len(calls) != 1 || calls[0].Name != "brave_search" || calls[0].Arguments != `{"query": "news", "count": "3"}` {
			t.Errorf("%q: %q %+v", text, content, calls)
		}
		checkSplits(t, "llama3_json", text)
		return
	}
	t.Fatal("the golden file has no llama3_1/builtin_tools case")
}

// TestHarmony: gpt-oss's answers as its real template renders them: the
// reasoning parser takes the analysis channel and unwraps the final one,
// this parser finds the commentary call to a function.
func TestHarmony(t *testing.T) {
	src, err := os.ReadFile("testdata/gpt_oss.jinja")
	if err != nil {
		t.Fatal(err)
	}
	if Detect(string(src), "") != "harmony" || reasoning.Detect(string(src), "") != "harmony" {
		t.Fatalf("Detect: %q %q", Detect(string(src), ""), reasoning.Detect(string(src), ""))
	}
	call := chat.Message{Role: "assistant", Content: "", ToolCalls: []map[string]any{toolCall("get_weather", `{"city": "Paris", "days": 3}`)},
		Extra: map[string]any{"thinking": "Need the weather."}}
	_, text := renderAnswer(t, "testdata/gpt_oss.jinja", "<|return|>", call, weatherTools)
	t.Logf("model text: %q", text)
	r, content, _ := reasoning.Split("harmony", text, false)
	if r != "Need the weather." {
		t.Errorf("reasoning %q", r)
	}
	rest, calls, _ := Parse("harmony", content)
	if rest != "" {
		t.Errorf("content %q", rest)
	}
	checkCalls(t, calls, []Call{{"get_weather", `{"city": "Paris", "days": 3}`}})
	checkSplits(t, "harmony", content)

	// A final answer after the analysis.
	answer := chat.Message{Role: "assistant", Content: "It is sunny.", Extra: map[string]any{"thinking": "Easy."}}
	_, text = renderAnswer(t, "testdata/gpt_oss.jinja", "<|return|>", answer, nil)
	t.Logf("model text: %q", text)
	r, content, _ = reasoning.Split("harmony", text, false)
	rest, calls, _ = Parse("harmony", content)
	if r != "Easy." || rest != "It is sunny." || len(calls) != 0 {
		t.Errorf("final: reasoning %q content %q calls %+v", r, rest, calls)
	}
	// Streamed a byte at a time, the two stages give the same.
	rs, _ := reasoning.NewStream("harmony", false)
	tc, _ := NewStream("harmony")
	var reason strings.Builder
	var evs []Event
	for i := range len(text) {
		p := rs.Push(text[i : i+1])
		reason.WriteString(p.Reasoning)
		evs = append(evs, tc.Push(p.Content)...)
	}
	p := rs.Close()
	reason.WriteString(p.Reasoning)
	evs = append(append(evs, tc.Push(p.Content)...), tc.Close()...)
	if c, _ := Collect(evs); reason.String() != "Easy." || c != "It is sunny." {
		t.Errorf("streamed: %q %q", reason.String(), c)
	}
}

// TestNonASCIIArguments: arguments are passed on byte by byte, and the
// bytes of a multi-byte character stay those bytes.
func TestNonASCIIArguments(t *testing.T) {
	for _, c := range []struct{ parser, text string }{
		{"hermes", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Zürich 東京\"}}\n</tool_call>"},
		{"mistral", `[TOOL_CALLS]f[ARGS]{"city": "Zürich 東京"}`},
		{"llama3_json", `{"name": "f", "parameters": {"city": "Zürich 東京"}}`},
	} {
		_, calls, err := Parse(c.parser, c.text)
		if err != nil || len(calls) != 1 || calls[0].Arguments != `{"city": "Zürich 東京"}` {
			t.Errorf("%s: %v %+v", c.parser, err, calls)
		}
	}
}
