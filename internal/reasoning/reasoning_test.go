package reasoning

import (
	"os"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/chat"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		parser, text   string
		opened         bool
		reason, answer string
	}{
		{"think", "<think>\nLet me think.\nTwo lines.\n</think>\n\nThe answer.", false, "Let me think.\nTwo lines.", "The answer."},
		// The template opened the thought in the prompt.
		{"think", "Still thinking\n</think>\n\nDone", true, "Still thinking", "Done"},
		// No thought at all: everything is content, byte for byte.
		{"think", "\nJust an answer\n", false, "", "\nJust an answer\n"},
		// Cut off inside the thought: it is all reasoning.
		{"think", "<think>\nhalf a thou", false, "half a thou", ""},
		// Qwen 3 with thinking off writes an empty thought.
		{"think", "<think>\n\n</think>\n\nHi", false, "", "Hi"},
		{"gemma4", "<|channel>thought\nPlan: add.<channel|>4", false, "Plan: add.", "4"},
		{"gemma4", "4", false, "", "4"},
		{"harmony", "<|channel|>analysis<|message|>Add.<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>", false, "Add.", "4"},
		// A model that does not write harmony: all content.
		{"harmony", "Just 4.", false, "", "Just 4."},
		// Cut off in the analysis: all reasoning.
		{"harmony", "<|channel|>analysis<|message|>Hmm, 2+", false, "Hmm, 2+", ""},
	}
	for _, c := range cases {
		r, a, err := Split(c.parser, c.text, c.opened)
		if err != nil {
			t.Fatal(err)
		}
		if r != c.reason || a != c.answer {
			t.Errorf("%s %q: reasoning %q content %q, want %q %q", c.parser, c.text, r, a, c.reason, c.answer)
		}
		// Streamed a byte at a time: the same split.
		s, _ := NewStream(c.parser, c.opened)
		var rs, as strings.Builder
		for i := range len(c.text) {
			p := s.Push(c.text[i : i+1])
			rs.WriteString(p.Reasoning)
			as.WriteString(p.Content)
		}
		p := s.Close()
		rs.WriteString(p.Reasoning)
		as.WriteString(p.Content)
		if rs.String() != c.reason || as.String() != c.answer {
			t.Errorf("%s %q streamed: %q %q", c.parser, c.text, rs.String(), as.String())
		}
	}
}

// TestQwen3RoundTrip: an answer split into reasoning_content and content,
// sent back as history, renders what the model wrote (the real Qwen 3
// template), so the next turn's prompt matches the one the model saw.
func TestQwen3RoundTrip(t *testing.T) {
	src, err := os.ReadFile("../../../shared/testdata/templates/qwen3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	if Detect(string(src), "") != "think" {
		t.Fatalf("Detect on the Qwen 3 template: %q", Detect(string(src), ""))
	}
	tmpl, err := chat.Parse(string(src), "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	user := []chat.Message{{Role: "user", Content: "2+2?"}}
	prompt, err := tmpl.Render(user, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if OpenedIn("think", prompt) {
		t.Errorf("the Qwen 3 generation prompt does not open a thought: %q", prompt)
	}
	generated := "<think>\nThe user asks 2+2.\nThat is 4.\n</think>\n\nIt is 4."
	r, a, _ := Split("think", generated, false)
	msg := chat.Message{Role: "assistant", Content: a, Extra: map[string]any{"reasoning_content": r}}
	full, err := tmpl.Render(append(user, msg), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := prompt + generated + "<|im_end|>\n"; full != want {
		t.Errorf("history renders\n%q\nwant\n%q", full, want)
	}
	// With thinking off the template closes an empty thought itself.
	off, _ := tmpl.Render(user, true, map[string]any{"enable_thinking": false})
	if !strings.HasSuffix(off, "<think>\n\n</think>\n\n") || OpenedIn("think", off) {
		t.Errorf("enable_thinking=false prompt: %q", off)
	}
	if !OpenedIn("think", prompt+"<think>\n") {
		t.Error("a prompt ending in <think> opens the thought")
	}
}

// TestGemma4Template: the parser is detected from Gemma 4's real
// template; with thinking off its generation prompt closes an empty
// thought (nothing opened), with thinking on the model opens it itself.
func TestGemma4Template(t *testing.T) {
	src, err := os.ReadFile("../toolcall/testdata/gemma4.jinja")
	if err != nil {
		t.Fatal(err)
	}
	if got := Detect(string(src), ""); got != "gemma4" {
		t.Fatalf("Detect: %q", got)
	}
	tmpl, err := chat.Parse(string(src), "<bos>", "<eos>")
	if err != nil {
		t.Fatal(err)
	}
	user := []chat.Message{{Role: "user", Content: "2+2?"}}
	for _, on := range []bool{false, true} {
		prompt, err := tmpl.Render(user, true, map[string]any{"enable_thinking": on})
		if err != nil {
			t.Fatal(err)
		}
		if OpenedIn("gemma4", prompt) {
			t.Errorf("enable_thinking=%v: the prompt leaves a thought open: %q", on, prompt)
		}
		if closed := strings.HasSuffix(prompt, "<|channel>thought\n<channel|>"); closed == on {
			t.Errorf("enable_thinking=%v: prompt ends %q", on, prompt[max(0, len(prompt)-40):])
		}
	}
	r, a, _ := Split("gemma4", "<|channel>thought\nAdd them.\n<channel|>4", false)
	if r != "Add them." || a != "4" {
		t.Errorf("split %q %q", r, a)
	}
}
