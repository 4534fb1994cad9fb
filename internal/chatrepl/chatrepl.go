// Package chatrepl is the interactive chat of `mlxcel run` on a terminal:
// a conversation kept through the model's chat template, answers
// streamed as they are generated, commands (/clear, /system, /exit), an
// interrupt that stops the answer (two in a row leave), the thought of
// reasoning models hidden unless asked for, and the speed of each answer.
// It reads lines from an io.Reader and writes to io.Writers, so tests
// drive it without a terminal.
package chatrepl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
	"github.com/mlxcel/mlxcel/internal/reasoning"
	"github.com/mlxcel/mlxcel/internal/sample"
	"github.com/mlxcel/mlxcel/internal/tokenizer"
)

// Session is one chat. Engine, Tokenizer and Template are required.
type Session struct {
	Engine     generate.Submitter
	MaxContext int // tokens a sequence may hold (prompt + answer)
	Tokenizer  *tokenizer.Tokenizer
	Template   *chat.Template
	StopIDs    []int32
	Params     sample.Params
	MaxTokens  int // per answer
	Stop       []string

	// Reasoning names the thinking syntax (reasoning.Parsers; "" none);
	// the thought is shown only with ShowReasoning.
	Reasoning     string
	ShowReasoning bool
	System        string

	In   io.Reader
	Out  io.Writer // answers
	Info io.Writer // prompts, notices, speed
	// Interrupts delivers Ctrl-C: the first stops a running answer, two
	// without a line typed in between end the session.
	Interrupts <-chan struct{}
	// Color dims the thought and the speed line (ANSI), for terminals.
	Color bool
	Name  string // shown in the greeting

	history []chat.Message
	intr    int // interrupts since the last line
}

// Run chats until /exit, end of input or a double interrupt.
func (s *Session) Run(ctx context.Context) error {
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(s.In)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		readErr <- sc.Err()
		close(lines)
	}()
	fmt.Fprintf(s.Info, "chatting with %s: /clear forgets the conversation, /system TEXT sets the system message, /exit leaves; Ctrl-C stops an answer\n", s.Name)
	for {
		fmt.Fprint(s.Info, ">>> ")
		select {
		case <-ctx.Done():
			return nil
		case <-s.Interrupts:
			if s.interrupted() {
				return nil
			}
			fmt.Fprintln(s.Info, "\n(Ctrl-C again or /exit to leave)")
		case line, ok := <-lines:
			if !ok {
				fmt.Fprintln(s.Info)
				return <-readErr
			}
			s.intr = 0
			done, err := s.handle(ctx, strings.TrimSpace(line))
			if done || err != nil {
				return err
			}
		}
	}
}

// interrupted counts a Ctrl-C and reports whether it is the second.
func (s *Session) interrupted() bool {
	s.intr++
	return s.intr >= 2
}

// handle runs one line: a command or a turn of the conversation.
func (s *Session) handle(ctx context.Context, line string) (done bool, err error) {
	switch {
	case line == "":
		return false, nil
	case line == "/exit" || line == "/quit" || line == "/bye":
		return true, nil
	case line == "/clear":
		s.history = nil
		fmt.Fprintln(s.Info, "(conversation cleared)")
		return false, nil
	case line == "/system" || strings.HasPrefix(line, "/system "):
		s.System = strings.TrimSpace(strings.TrimPrefix(line, "/system"))
		if s.System == "" {
			fmt.Fprintln(s.Info, "(system message removed)")
		} else {
			fmt.Fprintln(s.Info, "(system message set)")
		}
		return false, nil
	case line == "/help" || line == "/?":
		fmt.Fprintln(s.Info, "/clear  forget the conversation\n/system TEXT  set the system message (empty: none)\n/exit  leave")
		return false, nil
	case strings.HasPrefix(line, "/") && !strings.Contains(strings.Fields(line)[0][1:], "/"):
		fmt.Fprintf(s.Info, "unknown command %s (/help lists them)\n", strings.Fields(line)[0])
		return false, nil
	}
	return false, s.turn(ctx, line)
}

// messages is the conversation to render, with the system message first.
func (s *Session) messages(user string) []chat.Message {
	var msgs []chat.Message
	if s.System != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: s.System})
	}
	msgs = append(msgs, s.history...)
	return append(msgs, chat.Message{Role: "user", Content: user})
}

// prompt renders the conversation and drops the oldest exchanges until
// it leaves room for an answer.
func (s *Session) prompt(user string) ([]int32, string, error) {
	for {
		text, err := s.Template.Render(s.messages(user), true, nil)
		if err != nil {
			return nil, "", err
		}
		// The template writes BOS itself where the model wants one.
		ids, err := s.Tokenizer.Encode(text, false)
		if err != nil {
			return nil, "", err
		}
		room := min(s.MaxTokens, 64)
		if s.MaxContext <= 0 || len(ids)+room <= s.MaxContext {
			return ids, text, nil
		}
		if len(s.history) < 2 {
			return nil, "", fmt.Errorf("the message is %d tokens: too long for the %d-token context", len(ids), s.MaxContext)
		}
		s.history = s.history[2:]
		fmt.Fprintln(s.Info, "(the oldest exchange no longer fits the context and was dropped)")
	}
}

// turn answers one user message.
func (s *Session) turn(ctx context.Context, user string) error {
	ids, text, err := s.prompt(user)
	if err != nil {
		fmt.Fprintf(s.Info, "error: %v\n", err)
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-s.Interrupts:
			close(stopped)
			cancel()
		case <-ctx.Done():
		}
	}()
	out := newAnswerWriter(s, reasoning.OpenedIn(s.Reasoning, text))
	maxTokens := s.MaxTokens
	if s.MaxContext > 0 {
		maxTokens = min(maxTokens, s.MaxContext-len(ids))
	}
	res, err := generate.Run(ctx, s.Engine, s.Tokenizer.NewStreamDecoder(!s.markersSpecial()), generate.Request{
		Request: engine.Request{Prompt: ids, Params: s.Params, MaxTokens: maxTokens, StopIDs: s.StopIDs},
		Stop:    s.Stop,
	}, func(d generate.Delta) error { out.push(d.Text); return nil })
	cancel()
	<-watched // the watcher is done with s: an interrupt now counts below
	if err != nil {
		fmt.Fprintf(s.Info, "error: %v\n", err)
		return nil
	}
	content := out.close()
	select {
	case <-stopped:
		s.intr++
		fmt.Fprint(s.Info, " [stopped]")
		res.FinishReason = engine.FinishCancelled
	default:
	}
	fmt.Fprintln(s.Out)
	if res.Err != nil && !errors.Is(res.Err, context.Canceled) {
		fmt.Fprintf(s.Info, "error: %v\n", res.Err)
	}
	s.history = append(s.history, chat.Message{Role: "user", Content: user}, chat.Message{Role: "assistant", Content: content})
	s.speed(res)
	return nil
}

// markersSpecial reports whether the thinking syntax uses special tokens
// (Gemma 4's <|channel>): those must then reach the text, or the thought
// could not be told from the answer.
func (s *Session) markersSpecial() bool {
	if s.Reasoning == "" {
		return false
	}
	for _, m := range reasoning.Markers(s.Reasoning) {
		if id, ok := s.Tokenizer.TokenID(m); ok && s.Tokenizer.IsSpecial(id) {
			return true
		}
	}
	return false
}

// speed prints the answer's figures, as `mlxcel run` does at the end.
func (s *Session) speed(res generate.Result) {
	t := res.Timing
	if res.FinishReason == "" || res.FinishReason == engine.FinishCancelled {
		// A stopped request ends without the engine's timing.
		fmt.Fprintf(s.Info, "(%d tokens, stopped)\n", len(res.Tokens))
		return
	}
	line := fmt.Sprintf("(%d prompt tokens at %.1f tok/s, %d tokens at %.1f tok/s, %s)", t.PromptTokens, t.PromptTokS,
		t.GeneratedTokens, t.DecodeTokS, res.FinishReason)
	if s.Color {
		line = "\x1b[2m" + line + "\x1b[0m"
	}
	fmt.Fprintln(s.Info, line)
}

// answerWriter splits the streamed text into thought and answer and shows
// what it should.
type answerWriter struct {
	s       *Session
	rs      *reasoning.Stream
	content strings.Builder
	thought bool // inside a shown thought
	notice  bool // the "thinking" notice was printed
}

func newAnswerWriter(s *Session, opened bool) *answerWriter {
	w := &answerWriter{s: s}
	if s.Reasoning != "" {
		w.rs, _ = reasoning.NewStream(s.Reasoning, opened)
	}
	return w
}

func (w *answerWriter) push(text string) {
	if w.rs == nil {
		w.write(reasoning.Piece{Content: text})
		return
	}
	w.write(w.rs.Push(text))
}

func (w *answerWriter) close() string {
	if w.rs != nil {
		w.write(w.rs.Close())
	}
	if w.thought {
		w.endThought()
	}
	return w.content.String()
}

func (w *answerWriter) write(p reasoning.Piece) {
	if p.Reasoning != "" {
		switch {
		case w.s.ShowReasoning && !w.thought:
			w.thought = true
			fmt.Fprint(w.s.Out, w.dim("[thinking] "))
			fallthrough
		case w.s.ShowReasoning:
			fmt.Fprint(w.s.Out, w.dim(p.Reasoning))
		case !w.notice:
			w.notice = true
			fmt.Fprint(w.s.Info, "(thinking; --show-reasoning shows it) ")
		}
	}
	if p.Content != "" {
		if w.thought {
			w.endThought()
		}
		w.content.WriteString(p.Content)
		fmt.Fprint(w.s.Out, p.Content)
	}
}

func (w *answerWriter) endThought() {
	w.thought = false
	fmt.Fprint(w.s.Out, w.dim(" [/thinking]")+"\n")
}

func (w *answerWriter) dim(s string) string {
	if w.s.Color {
		return "\x1b[2m" + s + "\x1b[0m"
	}
	return s
}

// PlainTemplate is the conversation format for models without a chat
// template (base models such as stories260k): role-labelled turns.
const PlainTemplate = `{% for m in messages %}{% if m.role == 'system' %}{{ m.content }}

{% elif m.role == 'user' %}User: {{ m.content }}
{% else %}Assistant: {{ m.content }}
{% endif %}{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}`
