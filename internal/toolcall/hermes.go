package toolcall

import "strings"

// Hermes / Qwen 2.5 / Qwen 3: each call is a JSON object between tags,
//
//	<tool_call>
//	{"name": "get_weather", "arguments": {"city": "Paris"}}
//	</tool_call>
//
// with content before the first call and calls one after another.
const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
)

type hermes struct {
	in    *jsonCall // inside a <tool_call>
	after bool      // the call's JSON is read; skipping to </tool_call>
}

func (h *hermes) push(buf string, final bool, e *emitter) (int, bool) {
	switch {
	case h.in != nil:
		n, done, failed := h.in.feed(buf, e)
		switch {
		case done || (failed && h.in.started()):
			h.in, h.after = nil, true
			return n, true
		case failed || (final && !h.in.started()):
			// Not a call after all: the markup was content.
			e.text(hermesOpen + h.in.raw.String())
			h.in = nil
			return n, true
		}
		return n, false
	case h.after:
		return h.skipClose(buf, final)
	}
	at, n := holdText(buf, final, e, hermesOpen)
	if at < 0 {
		return n, false
	}
	h.in = newJSONCall()
	return at + len(hermesOpen), true
}

// skipClose drops what follows a call's JSON up to and including its
// closing tag.
func (h *hermes) skipClose(buf string, final bool) (int, bool) {
	if i := strings.Index(buf, hermesClose); i >= 0 {
		h.after = false
		return i + len(hermesClose), true
	}
	if final {
		return len(buf), false
	}
	return len(buf) - partialSuffix(buf, hermesClose), false
}
