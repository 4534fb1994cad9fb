// Package toolcall finds the tool calls a model writes in its own syntax
// and turns them into OpenAI tool calls: a function name and its
// arguments as a JSON object text.
//
// Each syntax has one parser (Hermes/Qwen <tool_call>, Llama 3.x JSON,
// Mistral [TOOL_CALLS], Gemma 4 <|tool_call>). A parser is used through a
// Stream, fed the generated text piece by piece: it returns the text that
// is final content, and calls as they form (the name first, then the
// arguments in pieces), holding back text that may be the start of call
// markup. Parse runs the same Stream over a whole text, so streamed and
// non-streamed answers always agree.
package toolcall

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Call is one parsed tool call.
type Call struct {
	Name string
	// Arguments is a JSON object text ("{}" when the model gave none).
	Arguments string
}

// Kind says what an Event carries.
type Kind int

const (
	// Text is final content.
	Text Kind = iota
	// Start opens call Index with its Name.
	Start
	// Args is a piece of call Index's arguments (JSON text; the pieces
	// of one call concatenate to its arguments).
	Args
)

// Event is one step of a stream's output.
type Event struct {
	Kind  Kind
	Text  string // Text: content; Args: the piece
	Index int    // Start, Args: the call's index, from 0
	Name  string // Start
}

// syntax is one call syntax's incremental parser. push gets the text not
// yet consumed and returns how many bytes it consumed (events emitted
// through e), and more when it changed state and wants to be called again
// even though it consumed nothing. With final set no more text will come.
// A syntax never consumes text it might still need.
type syntax interface {
	push(buf string, final bool, e *emitter) (n int, more bool)
}

// Parsers lists the parser names --tool-call-parser accepts.
func Parsers() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var registry = map[string]func() syntax{
	"hermes":      func() syntax { return &hermes{} },
	"llama3_json": func() syntax { return &llama3{} },
	"mistral":     func() syntax { return &mistral{} },
	"gemma4":      func() syntax { return &gemma4{} },
	"qwen3_coder": func() syntax { return &qwenXML{} },
	"harmony":     func() syntax { return &harmonyCalls{} },
}

// Known reports whether name is a parser.
func Known(name string) bool { _, ok := registry[name]; return ok }

// Markers lists the strings a parser's markup is made of, so a caller can
// tell whether the tokenizer marks any of them special (and then must
// keep special tokens in the decoded text).
func Markers(name string) []string {
	switch name {
	case "hermes":
		return []string{hermesOpen, hermesClose}
	case "llama3_json":
		return []string{pythonTag}
	case "mistral":
		return []string{mistralCalls, mistralArgs}
	case "gemma4":
		return []string{gemmaOpen, gemmaClose, gemmaQuote, gemmaResponse}
	case "qwen3_coder":
		return []string{hermesOpen, hermesClose}
	case "harmony":
		return []string{harmonyChannel, harmonyMessage, harmonyCall}
	}
	return nil
}

// Detect picks the parser for a model from its chat template (the syntax
// the template writes assistant tool calls in) and, failing that, its
// config.json model_type. It returns "" when neither says.
func Detect(template, modelType string) string {
	switch {
	case strings.Contains(template, harmonyChannel) && strings.Contains(template, harmonyMessage):
		return "harmony"
	case strings.Contains(template, gemmaOpen):
		return "gemma4"
	case strings.Contains(template, hermesOpen) && strings.Contains(template, xmlFunction):
		return "qwen3_coder"
	case strings.Contains(template, hermesOpen):
		return "hermes"
	case strings.Contains(template, mistralCalls):
		return "mistral"
	case strings.Contains(template, pythonTag), strings.Contains(template, `"parameters": `) && strings.Contains(template, "<|start_header_id|>"):
		return "llama3_json"
	}
	switch {
	case slices.Contains([]string{"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}, modelType):
		return "qwen3_coder"
	case slices.Contains([]string{"qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next"}, modelType):
		return "hermes"
	case modelType == "llama":
		return "llama3_json"
	case modelType == "mistral" || modelType == "mixtral":
		return "mistral"
	case strings.HasPrefix(modelType, "gemma4"):
		return "gemma4"
	case modelType == "gpt_oss":
		return "harmony"
	}
	return ""
}

// Stream parses one answer incrementally.
type Stream struct {
	syn syntax
	buf string
	e   emitter
}

// NewStream starts parsing with the named parser.
func NewStream(name string) (*Stream, error) {
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("toolcall: unknown parser %q (known: %s)", name, strings.Join(Parsers(), ", "))
	}
	return &Stream{syn: f()}, nil
}

// Schemas gives the parser the request's tools (name -> JSON Schema of
// the arguments), for syntaxes whose values carry no type of their own
// (qwen3_coder's plain-text parameters).
func (s *Stream) Schemas(tools map[string]json.RawMessage) {
	t, ok := s.syn.(interface {
		setTypes(func(fn, param string) string)
	})
	if !ok || len(tools) == 0 {
		return
	}
	types := map[string]map[string]string{}
	for name, schema := range tools {
		// Each property apart: one that is not an object (a boolean
		// schema) has no type, and must not hide the others'.
		var sch struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(schema, &sch) != nil {
			continue
		}
		types[name] = map[string]string{}
		for p, raw := range sch.Properties {
			var v struct {
				Type any `json:"type"`
			}
			if json.Unmarshal(raw, &v) == nil {
				if s, ok := v.Type.(string); ok {
					types[name][p] = s
				}
			}
		}
	}
	t.setTypes(func(fn, param string) string {
		ps, ok := types[fn]
		if !ok {
			return ""
		}
		if typ, ok := ps[param]; ok {
			return typ
		}
		return "json" // a known tool's parameter of no single type: JSON when it parses
	})
}

// Push adds generated text and returns what became final.
func (s *Stream) Push(text string) []Event {
	s.buf += text
	return s.run(false)
}

// Close ends the answer: text still held back is final (as content, or as
// the arguments of a call cut short by the length limit).
func (s *Stream) Close() []Event {
	evs := s.run(true)
	return append(evs, s.e.close()...)
}

// Calls reports how many calls the stream has started.
func (s *Stream) Calls() int { return s.e.calls }

func (s *Stream) run(final bool) []Event {
	for s.buf != "" {
		n, more := s.syn.push(s.buf, final, &s.e)
		s.buf = s.buf[n:]
		if n == 0 && !more {
			break
		}
	}
	return s.e.take()
}

// Parse splits a whole answer into content and calls.
func Parse(name, text string) (content string, calls []Call, err error) {
	s, err := NewStream(name)
	if err != nil {
		return "", nil, err
	}
	evs := append(s.Push(text), s.Close()...)
	content, calls = Collect(evs)
	return content, calls, nil
}

// Collect assembles events into content and calls.
func Collect(evs []Event) (string, []Call) {
	var b strings.Builder
	var calls []Call
	for _, ev := range evs {
		switch ev.Kind {
		case Text:
			b.WriteString(ev.Text)
		case Start:
			calls = append(calls, Call{Name: ev.Name})
		case Args:
			calls[ev.Index].Arguments += ev.Text
		}
	}
	return b.String(), calls
}

// emitter collects a syntax's events. Trailing whitespace of content is
// held until non-blank content follows: blank text next to a call (the
// "\n\n" before <tool_call>, the newline between calls) is markup, not
// content, while an answer without calls keeps every byte.
type emitter struct {
	evs     []Event
	blank   string
	calls   int
	argsLen map[int]int
}

func (e *emitter) text(s string) {
	if s == "" {
		return
	}
	body := strings.TrimRight(s, " \t\r\n")
	if body == "" {
		e.blank += s
		return
	}
	e.evs = append(e.evs, Event{Kind: Text, Text: e.blank + body})
	e.blank = s[len(body):]
}

// start opens a call and returns its index.
func (e *emitter) start(name string) int {
	e.blank = ""
	i := e.calls
	e.calls++
	e.evs = append(e.evs, Event{Kind: Start, Index: i, Name: name})
	return i
}

func (e *emitter) args(i int, s string) {
	if s == "" {
		return
	}
	if e.argsLen == nil {
		e.argsLen = map[int]int{}
	}
	e.argsLen[i] += len(s)
	if k := len(e.evs) - 1; k >= 0 && e.evs[k].Kind == Args && e.evs[k].Index == i {
		e.evs[k].Text += s // one piece per push, not per byte
		return
	}
	e.evs = append(e.evs, Event{Kind: Args, Index: i, Text: s})
}

// close gives every call arguments ("{}" for none) and keeps trailing
// blank text only in an answer without calls.
func (e *emitter) close() []Event {
	for i := range e.calls {
		if e.argsLen[i] == 0 {
			e.args(i, "{}")
		}
	}
	if e.calls == 0 && e.blank != "" {
		e.evs = append(e.evs, Event{Kind: Text, Text: e.blank})
	}
	e.blank = ""
	return e.take()
}

func (e *emitter) take() []Event {
	evs := e.evs
	e.evs = nil
	return evs
}

// holdText emits buf up to the first marker (returning its offset), or
// all of buf but a tail that may begin one (returning -1 and the bytes
// consumed).
func holdText(buf string, final bool, e *emitter, markers ...string) (at, consumed int) {
	first := -1
	for _, m := range markers {
		if i := strings.Index(buf, m); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 {
		e.text(buf[:first])
		return first, first
	}
	keep := 0
	if !final {
		for _, m := range markers {
			keep = max(keep, partialSuffix(buf, m))
		}
	}
	e.text(buf[:len(buf)-keep])
	return -1, len(buf) - keep
}

// partialSuffix is the length of the longest tail of s that is a proper
// prefix of m.
func partialSuffix(s, m string) int {
	for n := min(len(s), len(m)-1); n > 0; n-- {
		if strings.HasSuffix(s, m[:n]) {
			return n
		}
	}
	return 0
}
