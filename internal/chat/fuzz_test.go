package chat

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzChatTemplate: any template source either fails to parse with an
// error or renders (or fails to render) a conversation with tool calls,
// null contents and a tool answer without panicking.
func FuzzChatTemplate(f *testing.F) {
	for _, name := range []string{"gemma3.jinja", "llama3_1.jinja", "mistral_v1.jinja", "qwen2_5.jinja", "qwen3.jinja"} {
		b, err := os.ReadFile(filepath.Join(sharedTemplates, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), "hello", true)
	}
	f.Add("{% for m in messages %}{{ m.content | trim }}{% endfor %}", "", false)
	f.Add("{{ messages[0].content['x'] }}{% if %}", "x", true)
	f.Fuzz(func(t *testing.T, src, content string, tools bool) {
		tmpl, err := Parse(src, "<s>", "</s>")
		if err != nil {
			return
		}
		msgs := []Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: content}}
		extra := map[string]any{}
		if tools {
			call := map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "f", "arguments": map[string]any{"a": 1}}}
			msgs = append(msgs, Message{Role: "assistant", Content: nil, ToolCalls: []map[string]any{call}},
				Message{Role: "tool", Content: content, ToolCallID: "call_1"})
			extra["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{}}}}
		}
		_, _ = tmpl.Render(msgs, true, extra)
	})
}
