package toolcall

import "strings"

// Mistral writes calls after the [TOOL_CALLS] token, in one of two forms:
//
//	[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}, ...]   (tokenizers up to v7)
//	[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}                               (v11 on; [CALL_ID]id may precede [ARGS])
const (
	mistralCalls  = "[TOOL_CALLS]"
	mistralArgs   = "[ARGS]"
	mistralCallID = "[CALL_ID]"
)

const (
	mText = iota
	mAfter
	mArray
	mArrayCall
	mName
	mArgs
)

type mistral struct {
	st    int
	in    *jsonCall
	raw   string // markup consumed since [TOOL_CALLS], for a failed call
	name  string
	index int
	val   valueScanner
}

func (m *mistral) push(buf string, final bool, e *emitter) (int, bool) {
	switch m.st {
	case mText:
		at, n := holdText(buf, final, e, mistralCalls)
		if at < 0 {
			return n, false
		}
		m.st, m.raw = mAfter, mistralCalls
		return at + len(mistralCalls), true
	case mAfter:
		rest := strings.TrimLeft(buf, " \t\r\n")
		lead := len(buf) - len(rest)
		switch {
		case rest == "" && !final:
			m.raw += buf
			return len(buf), false
		case strings.HasPrefix(rest, "["):
			m.st = mArray
			return lead + 1, true
		}
		m.st, m.name = mName, ""
		return lead, true
	case mArray:
		return m.array(buf, final, e)
	case mArrayCall:
		n, done, failed := m.in.feed(buf, e)
		switch {
		case done || (failed && m.in.started()):
			m.st = mArray
			return n, true
		case failed || (final && !m.in.started()):
			m.fail(m.in.raw.String(), e)
			return n, true
		}
		return n, false
	case mName:
		return m.readName(buf, final, e)
	}
	return m.args(buf, e)
}

// array reads between the elements of the JSON list of calls.
func (m *mistral) array(buf string, final bool, e *emitter) (int, bool) {
	rest := strings.TrimLeft(buf, " \t\r\n,")
	lead := len(buf) - len(rest)
	switch {
	case rest == "":
		return lead, false
	case rest[0] == '{':
		m.in, m.st = newJSONCall(), mArrayCall
		return lead, true
	case rest[0] == ']':
		m.st = mText
		return lead + 1, true
	}
	m.fail("", e)
	return lead, true
}

// readName reads "name[ARGS]" or "name[CALL_ID]id[ARGS]".
func (m *mistral) readName(buf string, final bool, e *emitter) (int, bool) {
	i := strings.Index(buf, mistralArgs)
	if i < 0 {
		if final || strings.ContainsAny(buf, " \n{\"") && !strings.Contains(buf, mistralCallID) {
			m.fail(buf, e)
			return len(buf), true
		}
		return 0, false
	}
	name := buf[:i]
	if j := strings.Index(name, mistralCallID); j >= 0 {
		name = name[:j]
	}
	name = strings.TrimSpace(name)
	if name == "" {
		m.fail(buf[:i+len(mistralArgs)], e)
		return i + len(mistralArgs), true
	}
	m.index = e.start(name)
	m.st, m.val = mArgs, valueScanner{}
	return i + len(mistralArgs), true
}

// args passes the [ARGS] JSON value on as it arrives.
func (m *mistral) args(buf string, e *emitter) (int, bool) {
	n := 0
	if !m.val.begun {
		rest := strings.TrimLeft(buf, " \t\r\n")
		n = len(buf) - len(rest)
	}
	for ; n < len(buf); n++ {
		c := buf[n]
		if m.val.delimits(c) {
			m.st = mText
			return n, true
		}
		e.args(m.index, buf[n:n+1])
		if m.val.step(c) {
			m.st = mText
			return n + 1, true
		}
	}
	return n, false
}

// fail turns markup that did not parse into content.
func (m *mistral) fail(extra string, e *emitter) {
	if e.calls == 0 {
		e.text(m.raw + extra)
	}
	m.st, m.raw = mText, ""
}
