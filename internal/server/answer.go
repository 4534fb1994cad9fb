package server

import (
	"strings"

	"github.com/mlxcel/mlxcel/internal/reasoning"
	"github.com/mlxcel/mlxcel/internal/toolcall"
)

// Output shapes of tool calls: whole in a message, in pieces in a stream.
type toolCallOut struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function toolCallFunc `json:"function"`
}

type toolCallFunc struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// toolCallDelta: the first piece of a call carries id, type and name
// (arguments ""), the next ones only argument text, as OpenAI streams.
type toolCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function toolCallFuncDelta `json:"function"`
}

type toolCallFuncDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// answer reads one choice's text back as it is generated: the thought
// split off as reasoning, tool calls parsed out of the content. The
// same code serves streams (push per delta) and whole answers (push
// once), so both always agree.
type answer struct {
	rs       *reasoning.Stream // nil: no thinking syntax
	tc       *toolcall.Stream  // nil: tool calls are not parsed
	parallel bool              // keep every call, not only the first

	content, reasoning strings.Builder
	calls              []toolCallOut
}

// answerPiece is what one push made final.
type answerPiece struct {
	reasoning, content string
	calls              []toolCallDelta
}

func (p *answerPiece) empty() bool { return p.reasoning == "" && p.content == "" && len(p.calls) == 0 }

func (a *answer) push(text string) answerPiece {
	if a.rs == nil {
		return a.pushContent(text, false)
	}
	r := a.rs.Push(text)
	p := a.pushContent(r.Content, false)
	p.reasoning = r.Reasoning
	a.reasoning.WriteString(r.Reasoning)
	return p
}

// close ends the answer: text still held back is final.
func (a *answer) close() answerPiece {
	var p answerPiece
	if a.rs != nil {
		r := a.rs.Close()
		p = a.pushContent(r.Content, true)
		p.reasoning = r.Reasoning
		a.reasoning.WriteString(r.Reasoning)
		return p
	}
	return a.pushContent("", true)
}

func (a *answer) pushContent(text string, final bool) answerPiece {
	var p answerPiece
	if a.tc == nil {
		p.content = text
		a.content.WriteString(text)
		return p
	}
	evs := a.tc.Push(text)
	if final {
		evs = append(evs, a.tc.Close()...)
	}
	for _, ev := range evs {
		a.event(ev, &p)
	}
	return p
}

// event applies one parser event; with parallel_tool_calls false, calls
// after the first are dropped (as vLLM does).
func (a *answer) event(ev toolcall.Event, p *answerPiece) {
	switch {
	case ev.Kind == toolcall.Text:
		p.content += ev.Text
		a.content.WriteString(ev.Text)
	case ev.Index > 0 && !a.parallel:
	case ev.Kind == toolcall.Start:
		c := toolCallOut{ID: newID("call_"), Type: "function", Function: toolCallFunc{Name: ev.Name}}
		a.calls = append(a.calls, c)
		p.calls = append(p.calls, toolCallDelta{Index: ev.Index, ID: c.ID, Type: c.Type, Function: toolCallFuncDelta{Name: ev.Name}})
	default:
		a.calls[ev.Index].Function.Arguments += ev.Text
		if n := len(p.calls); n > 0 && p.calls[n-1].Index == ev.Index {
			p.calls[n-1].Function.Arguments += ev.Text
			return
		}
		p.calls = append(p.calls, toolCallDelta{Index: ev.Index, Function: toolCallFuncDelta{Arguments: ev.Text}})
	}
}

// finish maps the engine's finish reason: an answer that made calls and
// ended on its own ends as "tool_calls".
func (a *answer) finish(reason string) string {
	if reason == "stop" && len(a.calls) > 0 {
		return "tool_calls"
	}
	return reason
}

// message is the whole answer as a chat message.
func (a *answer) message() chatMessageOut {
	msg := chatMessageOut{Role: "assistant", ReasoningContent: a.reasoning.String(), ToolCalls: a.calls}
	content := a.content.String()
	if content != "" || len(a.calls) == 0 {
		msg.Content = &content // null beside tool calls, as OpenAI sends it
	}
	return msg
}
