package toolcall

import "strings"

// Llama 3.1-3.3 with custom tools answer with bare JSON, optionally after
// <|python_tag|>, several calls separated by ';':
//
//	{"name": "get_weather", "parameters": {"city": "Paris"}}
//
// As vLLM's llama3_json parser, an answer is a call only when it starts
// with the JSON (after whitespace); otherwise it is all content.
const pythonTag = "<|python_tag|>"

const (
	lStart = iota
	lCall
	lBetween
	lText
)

type llama3 struct {
	st  int
	in  *jsonCall
	pre string // what preceded the first call (blanks, the tag)
}

func (l *llama3) push(buf string, final bool, e *emitter) (int, bool) {
	switch l.st {
	case lStart:
		return l.start(buf, final, e)
	case lCall:
		n, done, failed := l.in.feed(buf, e)
		switch {
		case done || (failed && l.in.started()):
			l.st = lBetween
			return n, true
		case failed || (final && !l.in.started()):
			if e.calls == 0 {
				e.text(l.pre)
			}
			e.text(l.in.raw.String())
			l.st = lText
			return n, true
		}
		return n, false
	case lBetween:
		return l.between(buf, final, e)
	}
	e.text(buf)
	return len(buf), false
}

// start decides whether the answer opens with a call.
func (l *llama3) start(buf string, final bool, e *emitter) (int, bool) {
	rest := strings.TrimLeft(buf, " \t\r\n")
	lead := len(buf) - len(rest)
	switch {
	case strings.HasPrefix(rest, pythonTag):
		l.pre += buf[:lead+len(pythonTag)]
		return lead + len(pythonTag), true
	case strings.HasPrefix(rest, "{"):
		l.pre += buf[:lead]
		l.in, l.st = newJSONCall(), lCall
		return lead, true
	case !final && (rest == "" || strings.HasPrefix(pythonTag, rest)):
		return 0, false // too early to tell
	}
	e.text(l.pre)
	l.st = lText
	return 0, true
}

// between reads the separator after a call: another call, or content.
func (l *llama3) between(buf string, final bool, e *emitter) (int, bool) {
	rest := strings.TrimLeft(buf, " \t\r\n;")
	lead := len(buf) - len(rest)
	switch {
	case strings.HasPrefix(rest, "{"):
		l.in, l.st = newJSONCall(), lCall
		return lead, true
	case rest == "" && !final:
		return lead, false
	}
	l.st = lText
	return lead, true
}
