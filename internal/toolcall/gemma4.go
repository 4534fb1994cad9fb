package toolcall

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Gemma 4 writes calls in its own notation (its chat template's
// format_argument): strings between <|"|> quotes, bare keys, no spaces,
//
//	<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>
//
// and, after the last call, opens the tool's answer with <|tool_response>
// (which ends the turn). The arguments are converted to JSON one
// top-level value at a time.
const (
	gemmaOpen     = "<|tool_call>"
	gemmaClose    = "<tool_call|>"
	gemmaQuote    = `<|"|>`
	gemmaResponse = "<|tool_response>"
	gemmaCall     = "call:"
)

const (
	gText = iota
	gName
	gPairs
	gClose
)

type gemma4 struct {
	st    int
	index int
	pairs int
}

func (g *gemma4) push(buf string, final bool, e *emitter) (int, bool) {
	switch g.st {
	case gText:
		at, n := holdText(buf, final, e, gemmaOpen)
		if at < 0 {
			return n, false
		}
		g.st = gName
		return at + len(gemmaOpen), true
	case gName:
		return g.name(buf, final, e)
	case gPairs:
		return g.pair(buf, final, e)
	}
	return g.close(buf, final)
}

// name reads "call:NAME{".
func (g *gemma4) name(buf string, final bool, e *emitter) (int, bool) {
	i := strings.IndexByte(buf, '{')
	if i < 0 {
		if final || len(buf) > 256 {
			e.text(gemmaOpen + buf)
			g.st = gText
			return len(buf), true
		}
		return 0, false
	}
	name := strings.TrimSpace(strings.TrimPrefix(buf[:i], gemmaCall))
	if name == "" {
		e.text(gemmaOpen + buf[:i+1])
		g.st = gText
		return i + 1, true
	}
	g.index, g.pairs, g.st = e.start(name), 0, gPairs
	e.args(g.index, "{")
	return i + 1, true
}

// pair converts one "key:value" of the arguments, once the value is
// complete, or the closing brace.
func (g *gemma4) pair(buf string, final bool, e *emitter) (int, bool) {
	rest := strings.TrimLeft(buf, " \t\r\n,")
	lead := len(buf) - len(rest)
	if rest == "" {
		return lead, false
	}
	if rest[0] == '}' {
		e.args(g.index, "}")
		g.st = gClose
		return lead + 1, true
	}
	key, kn, ok := gemmaKey(rest)
	if !ok {
		if final {
			e.args(g.index, "}")
			return len(buf), false
		}
		return lead, false
	}
	val, vn, complete := gemmaValue(rest[kn:], final)
	if !complete {
		if final {
			e.args(g.index, "}")
			return len(buf), false
		}
		return lead, false
	}
	k, _ := json.Marshal(key)
	sep := ""
	if g.pairs > 0 {
		sep = ", "
	}
	g.pairs++
	e.args(g.index, sep+string(k)+": "+val)
	return lead + kn + vn, true
}

// close skips to the end of the call markup (and the <|tool_response>
// the model opens after its calls).
func (g *gemma4) close(buf string, final bool) (int, bool) {
	rest := strings.TrimLeft(buf, " \t\r\n")
	lead := len(buf) - len(rest)
	for _, m := range []string{gemmaClose, gemmaResponse} {
		if strings.HasPrefix(rest, m) {
			return lead + len(m), true
		}
		if !final && strings.HasPrefix(m, rest) {
			return lead, false
		}
	}
	g.st = gText
	return lead, true
}

// gemmaKey reads a key and its colon: bare, or between <|"|> quotes.
func gemmaKey(s string) (key string, n int, ok bool) {
	if strings.HasPrefix(s, gemmaQuote) {
		end := strings.Index(s[len(gemmaQuote):], gemmaQuote)
		if end < 0 {
			return "", 0, false
		}
		key = s[len(gemmaQuote) : len(gemmaQuote)+end]
		n = 2*len(gemmaQuote) + end
		if n >= len(s) || s[n] != ':' {
			return "", 0, false
		}
		return key, n + 1, true
	}
	i := strings.IndexByte(s, ':')
	if i < 0 {
		return "", 0, false
	}
	return strings.TrimSpace(s[:i]), i + 1, true
}

// gemmaValue converts one value to JSON. complete is false when s ends
// before the value does (always true when final: the value is cut off).
func gemmaValue(s string, final bool) (js string, n int, complete bool) {
	rest := strings.TrimLeft(s, " \t\r\n")
	lead := len(s) - len(rest)
	switch {
	case strings.HasPrefix(rest, gemmaQuote):
		end := strings.Index(rest[len(gemmaQuote):], gemmaQuote)
		if end < 0 {
			return "", 0, false
		}
		b, _ := json.Marshal(rest[len(gemmaQuote) : len(gemmaQuote)+end])
		return string(b), lead + 2*len(gemmaQuote) + end, true
	case strings.HasPrefix(rest, "{"):
		js, m, ok := gemmaObject(rest)
		return js, lead + m, ok
	case strings.HasPrefix(rest, "["):
		js, m, ok := gemmaArray(rest)
		return js, lead + m, ok
	}
	i := strings.IndexAny(rest, ",}]")
	if i < 0 {
		if !final {
			return "", 0, false
		}
		i = len(rest)
	}
	return gemmaScalar(strings.TrimSpace(rest[:i])), lead + i, true
}

func gemmaObject(s string) (string, int, bool) {
	var b strings.Builder
	b.WriteByte('{')
	n := 1
	for first := true; ; first = false {
		rest := strings.TrimLeft(s[n:], " \t\r\n,")
		n = len(s) - len(rest)
		if rest == "" {
			return "", 0, false
		}
		if rest[0] == '}' {
			b.WriteByte('}')
			return b.String(), n + 1, true
		}
		key, kn, ok := gemmaKey(rest)
		if !ok {
			return "", 0, false
		}
		val, vn, ok := gemmaValue(rest[kn:], false)
		if !ok {
			return "", 0, false
		}
		if !first {
			b.WriteString(", ")
		}
		k, _ := json.Marshal(key)
		b.WriteString(string(k) + ": " + val)
		n += kn + vn
	}
}

func gemmaArray(s string) (string, int, bool) {
	var b strings.Builder
	b.WriteByte('[')
	n := 1
	for first := true; ; first = false {
		rest := strings.TrimLeft(s[n:], " \t\r\n,")
		n = len(s) - len(rest)
		if rest == "" {
			return "", 0, false
		}
		if rest[0] == ']' {
			b.WriteByte(']')
			return b.String(), n + 1, true
		}
		val, vn, ok := gemmaValue(rest, false)
		if !ok {
			return "", 0, false
		}
		if !first {
			b.WriteString(", ")
		}
		b.WriteString(val)
		n += vn
	}
}

// gemmaScalar: numbers, booleans and null as JSON; any other bare word is
// a string.
func gemmaScalar(s string) string {
	switch s {
	case "true", "false", "null":
		return s
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil && json.Valid([]byte(s)) {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b)
}
