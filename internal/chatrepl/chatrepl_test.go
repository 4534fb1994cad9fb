package chatrepl

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/reasoning"
	"github.com/mlxcel/mlxcel/internal/tokenizer"
)

// recorder keeps the prompts the session submits.
type recorder struct {
	eng     *engine.Engine
	mu      sync.Mutex
	prompts [][]int32
}

func (r *recorder) Submit(ctx context.Context, req engine.Request) (*engine.Stream, error) {
	r.mu.Lock()
	r.prompts = append(r.prompts, req.Prompt)
	r.mu.Unlock()
	return r.eng.Submit(ctx, req)
}

// syncBuf is a writer safe for the session's goroutines, with a signal
// on the first write after arm.
type syncBuf struct {
	mu    sync.Mutex
	b     strings.Builder
	first chan struct{}
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.first != nil && strings.TrimSpace(string(p)) != "" {
		close(b.first)
		b.first = nil
	}
	return b.b.Write(p)
}

func (b *syncBuf) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

func newSession(t *testing.T, in io.Reader) (*Session, *recorder, *syncBuf, *syncBuf) {
	t.Helper()
	l, err := app.Load(app.Options{Backend: "cpu", Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Model.Backend().Close() })
	eng, err := engine.New(l.Model, engine.Config{Parallel: 1, MaxQueue: 1})
	if err != nil {
		t.Fatal(err)
	}
	eng.Start()
	t.Cleanup(eng.Stop)
	tmpl, err := chat.Parse(PlainTemplate, "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{eng: eng}
	out, info := &syncBuf{}, &syncBuf{}
	s := &Session{Engine: rec, MaxContext: eng.MaxContext(), Tokenizer: l.Tokenizer, Template: tmpl,
		StopIDs: l.StopIDs, MaxTokens: 24, In: in, Out: out, Info: info, Name: l.Name}
	return s, rec, out, info
}

func (r *recorder) text(t *testing.T, s *Session, i int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.prompts) {
		t.Fatalf("only %d prompts submitted", len(r.prompts))
	}
	return s.Tokenizer.Decode(r.prompts[i], false)
}

// Turns are rendered through the template with the history; /system and
// /clear change what the next prompt holds; each answer is streamed to
// Out and followed by its speed.
func TestConversation(t *testing.T) {
	in := strings.NewReader("Once upon a time\n/system You tell stories.\nWhat next?\n/clear\nHello\n/nope\n/exit\nnever read\n")
	s, rec, out, info := newSession(t, in)
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rec.prompts) != 3 {
		t.Fatalf("%d prompts, want 3 (the line after /exit is not read)", len(rec.prompts))
	}
	answers := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(answers) < 3 || strings.TrimSpace(answers[0]) == "" {
		t.Fatalf("answers %q", out.String())
	}
	first := answers[0]
	if got := rec.text(t, s, 0); got != "User: Once upon a time\nAssistant:" {
		t.Errorf("first prompt %q", got)
	}
	want := "You tell stories.\n\nUser: Once upon a time\nAssistant: " + strings.TrimSpace(first) + "\nUser: What next?\nAssistant:"
	if got := rec.text(t, s, 1); got != want {
		t.Errorf("second prompt\n got %q\nwant %q", got, want)
	}
	if got := rec.text(t, s, 2); got != "You tell stories.\n\nUser: Hello\nAssistant:" {
		t.Errorf("after /clear %q", got)
	}
	speed := regexp.MustCompile(`\(\d+ prompt tokens at [\d.]+ tok/s, (\d+) tokens at [\d.]+ tok/s, (stop|length)\)`)
	if n := len(speed.FindAllString(info.String(), -1)); n != 3 {
		t.Errorf("%d speed lines, want 3:\n%s", n, info.String())
	}
	for _, w := range []string{"(system message set)", "(conversation cleared)", "unknown command /nope"} {
		if !strings.Contains(info.String(), w) {
			t.Errorf("info lacks %q:\n%s", w, info.String())
		}
	}
}

// Ctrl-C during an answer stops it (the session goes on); a second one
// without a line in between ends the session.
func TestInterrupt(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	s, rec, out, info := newSession(t, pr)
	s.MaxTokens = 400 // long enough to be interrupted
	first := make(chan struct{})
	out.first = first
	intr := make(chan struct{})
	s.Interrupts = intr
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	pw.Write([]byte("Once upon a time\n"))
	<-first
	intr <- struct{}{}
	waitFor(t, func() bool { return strings.Contains(info.String(), "[stopped]") })
	waitFor(t, func() bool { return strings.Contains(info.String(), "stopped)") })
	if m := regexp.MustCompile(`\((\d+) tokens, stopped\)`).FindStringSubmatch(info.String()); m == nil || m[1] == "400" || m[1] == "0" {
		t.Fatalf("the answer was not cut short: %s", info.String())
	}
	select {
	case err := <-done:
		t.Fatalf("one Ctrl-C ended the session: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	intr <- struct{}{}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a second Ctrl-C did not end the session")
	}
	if len(rec.prompts) != 1 {
		t.Errorf("%d prompts", len(rec.prompts))
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("timed out")
}

// The thought is hidden (with a one-time notice) unless ShowReasoning,
// and never kept in the history's answer.
func TestReasoningHidden(t *testing.T) {
	pieces := []string{"<th", "ink>\nLet me ", "think.\n</think>\n\nThe ", "answer."}
	for _, show := range []bool{false, true} {
		out, info := &syncBuf{}, &syncBuf{}
		s := &Session{Reasoning: "think", ShowReasoning: show, Out: out, Info: info}
		w := newAnswerWriter(s, reasoning.OpenedIn("think", "<|im_start|>assistant\n"))
		for _, p := range pieces {
			w.push(p)
		}
		if got := w.close(); got != "The answer." {
			t.Errorf("show=%v: content %q", show, got)
		}
		if show {
			if got := out.String(); got != "[thinking] Let me think. [/thinking]\nThe answer." {
				t.Errorf("shown: %q", got)
			}
			continue
		}
		if out.String() != "The answer." || !strings.Contains(info.String(), "--show-reasoning") {
			t.Errorf("hidden: out %q info %q", out.String(), info.String())
		}
	}
}

// Markers that are special tokens must reach the text (they are skipped
// otherwise): Qwen 3's <think> is a plain added token, so specials stay
// skipped; a tokenizer that marks it special keeps them.
func TestMarkersSpecial(t *testing.T) {
	src := "../../../shared/testdata/tokenizers/qwen3/tokenizer.json"
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, special := range []bool{false, true} {
		dir := t.TempDir()
		var tj map[string]any
		if err := json.Unmarshal(b, &tj); err != nil {
			t.Fatal(err)
		}
		for _, a := range tj["added_tokens"].([]any) {
			if a := a.(map[string]any); a["content"] == "<think>" {
				a["special"] = special
			}
		}
		out, _ := json.Marshal(tj)
		os.WriteFile(filepath.Join(dir, "tokenizer.json"), out, 0o644)
		tok, err := tokenizer.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		s := &Session{Tokenizer: tok, Reasoning: "think"}
		if got := s.markersSpecial(); got != special {
			t.Errorf("<think> special=%v: markersSpecial %v", special, got)
		}
		s.Reasoning = ""
		if s.markersSpecial() {
			t.Error("no parser, yet special markers")
		}
	}
}
