// Package reasoning splits a model's thinking from its answer: Qwen 3's
// <think>...</think> (also when the chat template already opened the
// thought in the prompt) and Gemma 4's <|channel>thought...<channel|>.
// The thought is returned as reasoning_content (vLLM's field), the rest as
// content.
//
// Like the tool-call parsers, a Parser is a Stream fed the generated text
// piece by piece; Split runs the same stream over a whole text. Newlines
// just inside the markers and just after the closing one are dropped,
// exactly as the Qwen 3 template drops them when it renders the answer
// back from history, so a conversation sent back renders the same prompt.
package reasoning

import (
	"fmt"
	"sort"
	"strings"
)

// markers are one syntax's opening and closing strings.
type markers struct{ open, close string }

var registry = map[string]markers{
	"think":  {"<think>", "</think>"},
	"gemma4": {"<|channel>thought", "<channel|>"},
}

// Parsers lists the names --reasoning-parser accepts.
func Parsers() []string {
	names := []string{"harmony"}
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Known reports whether name is a parser.
func Known(name string) bool { _, ok := registry[name]; return ok || name == "harmony" }

// Markers lists the parser's markup strings (to check whether the
// tokenizer marks them special).
func Markers(name string) []string {
	if name == "harmony" {
		return []string{hChannel, hMessage, hEnd}
	}
	m := registry[name]
	if name == "gemma4" {
		return []string{"<|channel>", m.close}
	}
	return []string{m.open, m.close}
}

// Detect picks the parser from the chat template and model_type; "" when
// the model has no thinking syntax.
func Detect(template, modelType string) string {
	switch {
	case strings.Contains(template, hChannel) && strings.Contains(template, hMessage):
		return "harmony"
	case strings.Contains(template, "<|channel>") && strings.Contains(template, "thought"):
		return "gemma4"
	case strings.Contains(template, "<think>"):
		return "think"
	case strings.HasPrefix(modelType, "qwen3"):
		return "think"
	case strings.HasPrefix(modelType, "gemma4"):
		return "gemma4"
	case modelType == "gpt_oss":
		return "harmony"
	}
	return ""
}

// OpenedIn reports whether prompt (the rendered chat) ends inside an open
// thought, so the answer starts with reasoning: DeepSeek-R1 style
// templates and Qwen 3 variants end the generation prompt with
// "<think>\n".
func OpenedIn(name, prompt string) bool {
	m, ok := registry[name]
	if !ok {
		return false
	}
	i := strings.LastIndex(prompt, m.open)
	return i >= 0 && !strings.Contains(prompt[i:], m.close) && strings.TrimSpace(prompt[i+len(m.open):]) == ""
}

const (
	sStart   = iota // nothing read: an opening marker may come
	sThought        // inside the thought
	sAnswer         // after it (or no thought at all)
)

// Stream splits one answer.
type Stream struct {
	m       markers
	st      int
	buf     string
	lead    bool // drop leading newlines of the part being read
	pending string
	harmony *harmony // gpt-oss's channels instead of markers
}

// Piece is what a push made final.
type Piece struct {
	Reasoning, Content string
}

// NewStream starts an answer; opened says the prompt already opened the
// thought (OpenedIn).
func NewStream(name string, opened bool) (*Stream, error) {
	if name == "harmony" {
		return &Stream{harmony: &harmony{}}, nil
	}
	m, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("reasoning: unknown parser %q (known: %s)", name, strings.Join(Parsers(), ", "))
	}
	s := &Stream{m: m}
	if opened {
		s.st, s.lead = sThought, true
	}
	return s, nil
}

// InThought reports whether the stream is inside the thought.
func (s *Stream) InThought() bool { return s.st == sThought }

// Push adds text and returns what is final.
func (s *Stream) Push(text string) Piece {
	if s.harmony != nil {
		return s.harmony.push(text, false)
	}
	s.buf += text
	return s.run(false)
}

// Close returns the rest: a thought cut off by the length limit stays
// reasoning.
func (s *Stream) Close() Piece {
	if s.harmony != nil {
		return s.harmony.push("", true)
	}
	return s.run(true)
}

func (s *Stream) run(final bool) Piece {
	var p Piece
	for {
		switch s.st {
		case sStart:
			rest := strings.TrimLeft(s.buf, " \t\r\n")
			switch {
			case strings.HasPrefix(rest, s.m.open):
				s.buf = rest[len(s.m.open):]
				s.st, s.lead = sThought, true
				continue
			case !final && strings.HasPrefix(s.m.open, rest):
				return p // may still become the opening marker
			}
			s.st = sAnswer
			continue
		case sThought:
			if i := strings.Index(s.buf, s.m.close); i >= 0 {
				p.Reasoning += s.trimmed(s.buf[:i], true)
				s.buf = s.buf[i+len(s.m.close):]
				s.st, s.lead, s.pending = sAnswer, true, ""
				continue
			}
			keep := 0
			if !final {
				keep = partialSuffix(s.buf, s.m.close)
			}
			p.Reasoning += s.trimmed(s.buf[:len(s.buf)-keep], final)
			s.buf = s.buf[len(s.buf)-keep:]
			return p
		default:
			t := s.buf
			if s.lead {
				t = strings.TrimLeft(t, "\n")
				s.lead = t == ""
			}
			p.Content += t
			s.buf = ""
			return p
		}
	}
}

// trimmed passes thought text on without its leading newlines and holds
// trailing newlines back until more thought follows (they are dropped
// when the closing marker comes next).
func (s *Stream) trimmed(t string, closing bool) string {
	if s.lead {
		t = strings.TrimLeft(t, "\n")
		if t == "" {
			return ""
		}
		s.lead = false
	}
	t = s.pending + t
	body := strings.TrimRight(t, "\n")
	s.pending = t[len(body):]
	if closing {
		s.pending = ""
	}
	return body
}

// Split divides a whole answer into reasoning and content.
func Split(name, text string, opened bool) (reasoning, content string, err error) {
	s, err := NewStream(name, opened)
	if err != nil {
		return "", "", err
	}
	a, b := s.Push(text), s.Close()
	return a.Reasoning + b.Reasoning, a.Content + b.Content, nil
}

func partialSuffix(s, m string) int {
	for n := min(len(s), len(m)-1); n > 0; n-- {
		if strings.HasSuffix(s, m[:n]) {
			return n
		}
	}
	return 0
}
