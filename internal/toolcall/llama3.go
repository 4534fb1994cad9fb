package toolcall

import (
	"encoding/json"
	"strings"
)

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
	lBuiltin
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
	case lBuiltin:
		return l.builtin(buf, final, e)
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
	case strings.Contains(l.pre, pythonTag) && builtinPrefix(rest, final):
		l.pre += buf[:lead]
		l.st = lBuiltin
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

// Built-in tools (brave_search, wolfram_alpha, ...) are called in Python
// form after <|python_tag|>, as the Llama 3.1 template writes them:
//
//	<|python_tag|>brave_search.call(query="news", count="3")

// builtinPrefix reports whether s starts (or, before the end, may start)
// with "name.call(".
func builtinPrefix(s string, final bool) bool {
	i := 0
	for i < len(s) && (s[i] == '_' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || i > 0 && s[i] >= '0' && s[i] <= '9') {
		i++
	}
	if i == 0 {
		return false
	}
	tail := s[i:]
	return strings.HasPrefix(tail, ".call(") || !final && strings.HasPrefix(".call(", tail)
}

// builtin reads a whole "name.call(k="v", ...)" once its parenthesis
// closes and passes it on as one call.
func (l *llama3) builtin(buf string, final bool, e *emitter) (int, bool) {
	open := strings.Index(buf, ".call(")
	if open < 0 || !builtinPrefix(buf, final) {
		if !final && builtinPrefix(buf, false) {
			return 0, false // "name.ca" so far
		}
		e.text(l.pre) // not a built-in call: all content
		l.st = lText
		return 0, true
	}
	args, n, ok := pyArgs(buf[open+len(".call("):])
	if !ok {
		if final {
			e.text(l.pre + buf)
			l.st = lText
			return len(buf), false
		}
		return 0, false
	}
	i := e.start(buf[:open])
	e.args(i, args)
	l.st = lBetween
	return open + len(".call(") + n, true
}

// pyArgs converts "k="v", k2=3)" to a JSON object; n counts the bytes
// through the closing parenthesis; ok is false until it is read.
func pyArgs(s string) (js string, n int, ok bool) {
	var b strings.Builder
	b.WriteByte('{')
	for first := true; ; first = false {
		rest := strings.TrimLeft(s[n:], " ,")
		n = len(s) - len(rest)
		if rest == "" {
			return "", 0, false
		}
		if rest[0] == ')' {
			b.WriteByte('}')
			return b.String(), n + 1, true
		}
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return "", 0, false
		}
		key := strings.TrimSpace(rest[:eq])
		val := rest[eq+1:]
		var v string
		var used int
		if strings.HasPrefix(val, "\"") {
			end := strings.IndexByte(val[1:], '"')
			if end < 0 {
				return "", 0, false
			}
			q, _ := json.Marshal(val[1 : 1+end])
			v, used = string(q), end+2
		} else {
			end := strings.IndexAny(val, ",)")
			if end < 0 {
				return "", 0, false
			}
			raw := strings.TrimSpace(val[:end])
			v = raw
			if !json.Valid([]byte(raw)) {
				q, _ := json.Marshal(raw)
				v = string(q)
			}
			used = end
		}
		k, _ := json.Marshal(key)
		if !first {
			b.WriteString(", ")
		}
		b.WriteString(string(k) + ": " + v)
		n += eq + 1 + used
	}
}
