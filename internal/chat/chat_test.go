package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const sharedTemplates = "../../../shared/testdata/templates"

// goldenCase is one render in renders.golden.json (transformers'
// apply_chat_template) or testdata/extra.golden.json (gen_extra.py).
type goldenCase struct {
	Name                string                       `json:"name"`
	Template            string                       `json:"template"`
	TemplateSource      *string                      `json:"template_source"`
	Conversation        string                       `json:"conversation"`
	Messages            []map[string]json.RawMessage `json:"messages"`
	AddGenerationPrompt bool                         `json:"add_generation_prompt"`
	BOSToken            *string                      `json:"bos_token"`
	EOSToken            *string                      `json:"eos_token"`
	ExtraContext        map[string]json.RawMessage   `json:"extra_context"`
	Rendered            *string                      `json:"rendered"`
	Error               *string                      `json:"error"`
}

func (c goldenCase) label(i int) string {
	if c.Name != "" {
		return c.Name
	}
	agp := "nogen"
	if c.AddGenerationPrompt {
		agp = "gen"
	}
	return strings.TrimSuffix(c.Template, ".jinja") + "/" + c.Conversation + "/" + agp
}

func loadGolden(t *testing.T, path string) []goldenCase {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return doc.Cases
}

// toMessages maps golden JSON messages onto Message the way a server maps an
// OpenAI request: raw JSON for everything whose key order matters.
func toMessages(t *testing.T, raw []map[string]json.RawMessage) []Message {
	t.Helper()
	out := make([]Message, len(raw))
	for i, fields := range raw {
		var m Message
		for k, v := range fields {
			switch k {
			case "role":
				must(t, json.Unmarshal(v, &m.Role))
			case "content":
				var s string
				if json.Unmarshal(v, &s) == nil {
					m.Content = s
				} else if string(v) != "null" {
					m.Content = v
				}
			case "name":
				must(t, json.Unmarshal(v, &m.Name))
			case "tool_call_id":
				must(t, json.Unmarshal(v, &m.ToolCallID))
			case "tool_calls":
				var calls []map[string]json.RawMessage
				must(t, json.Unmarshal(v, &calls))
				for _, c := range calls {
					call := map[string]any{}
					for ck, cv := range c {
						call[ck] = cv
					}
					m.ToolCalls = append(m.ToolCalls, call)
				}
			default:
				if m.Extra == nil {
					m.Extra = map[string]any{}
				}
				m.Extra[k] = v
			}
		}
		out[i] = m
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func runGolden(t *testing.T, cases []goldenCase) {
	for i, c := range cases {
		t.Run(c.label(i), func(t *testing.T) {
			src := ""
			if c.TemplateSource != nil {
				src = *c.TemplateSource
			} else {
				b, err := os.ReadFile(filepath.Join(sharedTemplates, c.Template))
				must(t, err)
				src = string(b)
			}
			bos, eos := "", ""
			if c.BOSToken != nil {
				bos = *c.BOSToken
			}
			if c.EOSToken != nil {
				eos = *c.EOSToken
			}
			tmpl, err := Parse(src, bos, eos)
			must(t, err)
			extra := map[string]any{}
			for k, v := range c.ExtraContext {
				extra[k] = v
			}
			got, err := tmpl.Render(toMessages(t, c.Messages), c.AddGenerationPrompt, extra)
			if c.Error != nil {
				var re *RaiseError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), *c.Error) {
					t.Fatalf("want raise_exception error %q, got %v", *c.Error, err)
				}
				return
			}
			must(t, err)
			if got != *c.Rendered {
				t.Fatalf("render differs\n got: %q\nwant: %q", got, *c.Rendered)
			}
		})
	}
}

// TestGoldenRenders checks byte-identity with transformers on every shared
// golden case.
func TestGoldenRenders(t *testing.T) {
	cases := loadGolden(t, filepath.Join(sharedTemplates, "renders.golden.json"))
	if len(cases) < 30 {
		t.Fatalf("expected at least 30 golden cases, found %d", len(cases))
	}
	runGolden(t, cases)
}

// TestExtraRenders covers tools, tool calls, reasoning, content parts, helper
// functions and raise_exception against jinja2 set up as transformers does.
func TestExtraRenders(t *testing.T) {
	runGolden(t, loadGolden(t, "testdata/extra.golden.json"))
}

func TestRaiseException(t *testing.T) {
	tmpl, err := Parse(`{% if messages[0].role != 'user' %}{{ raise_exception('First message must be from ' ~ 'the user') }}{% endif %}ok`, "", "")
	must(t, err)
	_, err = tmpl.Render([]Message{{Role: "assistant", Content: "hi"}}, false, nil)
	var re *RaiseError
	if !errors.As(err, &re) || re.Message != "First message must be from the user" {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), "First message must be from the user") {
		t.Fatalf("error text %q lacks the message", err)
	}
	out, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, false, nil)
	if err != nil || out != "ok" {
		t.Fatalf("got %q, %v", out, err)
	}
}

// TestMessageShape pins the dict a template sees for a Message: role and
// content always, optional OpenAI keys only when set, Extra last.
func TestMessageShape(t *testing.T) {
	tmpl, err := Parse(`{% for m in messages %}{{ m | tojson }}|{{ 'tool_calls' in m }}|{{ m.content is string }}
{% endfor %}`, "", "")
	must(t, err)
	msgs := []Message{
		{Role: "user", Content: "hi"},
		{Role: "assistant", ToolCalls: []map[string]any{{
			"type": "function", "id": "c1",
			"function": map[string]any{"arguments": map[string]any{"x": 1.0, "y": 0.5}, "name": "f"},
		}}},
		{Role: "tool", Content: "42", ToolCallID: "c1", Name: "f"},
		{Role: "user", Content: []map[string]any{{"text": "look", "type": "text"}, {"type": "image"}}},
		{Role: "assistant", Content: "ok", Extra: map[string]any{"reasoning_content": "hmm"}},
		{Role: "assistant", Content: json.RawMessage(`[{"type":"text","text":"raw","z":1.0}]`)},
	}
	got, err := tmpl.Render(msgs, false, nil)
	must(t, err)
	want := `{"role": "user", "content": "hi"}|False|True
{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1, "y": 0.5}}}]}|True|False
{"role": "tool", "content": "42", "name": "f", "tool_call_id": "c1"}|False|True
{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image"}]}|False|False
{"role": "assistant", "content": "ok", "reasoning_content": "hmm"}|False|True
{"role": "assistant", "content": [{"type": "text", "text": "raw", "z": 1.0}]}|False|False
`
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestRenderContext(t *testing.T) {
	tmpl, err := Parse(`{{ bos_token }}|{{ eos_token is defined }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|{{ enable_thinking }}|{{ strftime_now('%d %b %Y') }}`, "<s>", "")
	must(t, err)
	tmpl.now = func() time.Time { return time.Date(2025, 3, 7, 9, 0, 0, 0, time.UTC) }
	got, err := tmpl.Render(nil, true, map[string]any{"enable_thinking": false})
	must(t, err)
	if want := "<s>|False|True|True|True|False|07 Mar 2025"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	// extra may override the tokens and define tools.
	got, err = tmpl.Render(nil, false, map[string]any{"bos_token": "<B>", "tools": []any{}})
	must(t, err)
	if !strings.HasPrefix(got, "<B>|False|False|True|False|") {
		t.Fatalf("got %q", got)
	}
}

func TestTemplateErrors(t *testing.T) {
	if _, err := Parse(`{% if %}`, "", ""); err == nil {
		t.Fatal("want a parse error")
	}
	tmpl, err := Parse(`{{ messages | tojson }}`, "", "")
	must(t, err)
	_, err = tmpl.Render([]Message{{Role: "user", Content: json.RawMessage(`{"a":`)}}, false, nil)
	if err == nil {
		t.Fatal("want an error for invalid raw JSON content")
	}
	_, err = tmpl.Render(nil, false, map[string]any{"bad": make(chan int)})
	if err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("want an error naming the variable, got %v", err)
	}
}

func TestConcurrentRender(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(sharedTemplates, "qwen3.jinja"))
	must(t, err)
	tmpl, err := Parse(string(b), "", "<|im_end|>")
	must(t, err)
	want, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, true, nil)
	must(t, err)
	done := make(chan string, 8)
	for range 8 {
		go func() {
			out, _ := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, true, nil)
			done <- out
		}()
	}
	for range 8 {
		if got := <-done; got != want {
			t.Fatalf("concurrent render differs: %q", got)
		}
	}
}
