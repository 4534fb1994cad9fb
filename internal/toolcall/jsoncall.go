package toolcall

import (
	"encoding/json"
	"strings"
)

// jsonCall reads one call written as a JSON object {"name": ...,
// "arguments": {...}} (or "parameters", Llama's key) byte by byte. The
// call starts as soon as its name is complete; the arguments' JSON text
// is passed on as it arrives, so a client sees it grow. Arguments that
// come before the name, or as a JSON string holding the object, are
// passed on whole once known.
type jsonCall struct {
	st      int
	key     strings.Builder // the key being read (raw JSON string)
	curKey  string
	name    strings.Builder // the name value (raw JSON string)
	nameStr string
	haveNm  bool
	val     valueScanner
	pending strings.Builder // arguments held until the name is known
	argsStr bool            // the arguments value is a JSON string
	index   int             // call index once started, else -1
	raw     strings.Builder // everything consumed, for a failed call
}

const (
	jOpen = iota
	jKeyOrEnd
	jKey
	jColon
	jValueStart
	jValue
	jComma
)

func newJSONCall() *jsonCall { return &jsonCall{index: -1} }

// started reports whether the call has been announced (its name read).
func (j *jsonCall) started() bool { return j.index >= 0 }

// feed consumes s. It returns the bytes consumed, and done when the
// object closed or failed when s does not continue a call object (the
// failing byte is not consumed).
func (j *jsonCall) feed(s string, e *emitter) (n int, done, failed bool) {
	for n < len(s) {
		c := s[n]
		switch j.st {
		case jOpen, jKeyOrEnd, jColon, jComma, jValueStart:
			if isSpace(c) {
				break
			}
			switch {
			case j.st == jOpen && c == '{':
				j.st = jKeyOrEnd
			case j.st == jKeyOrEnd && c == '"':
				j.key.Reset()
				j.key.WriteByte(c)
				j.val = valueScanner{}
				j.val.step(c)
				j.st = jKey
			case (j.st == jKeyOrEnd || j.st == jComma) && c == '}':
				j.raw.WriteString(s[:n+1])
				ok := j.finish(e)
				return n + 1, ok, !ok
			case j.st == jComma && c == ',':
				j.st = jKeyOrEnd
			case j.st == jColon && c == ':':
				j.st = jValueStart
			case j.st == jValueStart:
				j.val = valueScanner{}
				j.st = jValue
				if j.isArgs() {
					j.argsStr = c == '"'
				}
				continue // the value's first byte goes through jValue
			default:
				j.raw.WriteString(s[:n])
				return n, false, true
			}
		case jKey:
			j.key.WriteByte(c)
			if j.val.step(c) {
				var k string
				if json.Unmarshal([]byte(j.key.String()), &k) != nil {
					j.raw.WriteString(s[:n])
					return n, false, true
				}
				j.curKey = k
				j.st = jColon
			}
		case jValue:
			if j.val.delimits(c) {
				j.endValue(e)
				j.st = jComma
				continue // the delimiter is read by jComma
			}
			j.valueByte(c, e)
			if j.val.step(c) {
				j.endValue(e)
				j.st = jComma
			}
		}
		n++
	}
	j.raw.WriteString(s)
	return n, false, false
}

func (j *jsonCall) isArgs() bool { return j.curKey == "arguments" || j.curKey == "parameters" }

// valueByte routes one byte of a value to the name, the arguments or
// nowhere.
func (j *jsonCall) valueByte(c byte, e *emitter) {
	switch {
	case j.curKey == "name":
		j.name.WriteByte(c)
	case j.isArgs() && j.started() && !j.argsStr:
		e.args(j.index, string([]byte{c})) // a byte, not the rune c
	case j.isArgs():
		j.pending.WriteByte(c)
	}
}

func (j *jsonCall) endValue(e *emitter) {
	if j.curKey != "name" || j.haveNm {
		return
	}
	if json.Unmarshal([]byte(j.name.String()), &j.nameStr) != nil || j.nameStr == "" {
		return
	}
	j.haveNm = true
	j.index = e.start(j.nameStr)
	if j.pending.Len() > 0 && !j.argsStr {
		e.args(j.index, j.pending.String())
		j.pending.Reset()
	}
}

// finish ends the object: arguments held back (a JSON string, or ones
// read before the name) are passed on. It reports whether this was a call.
func (j *jsonCall) finish(e *emitter) bool {
	if !j.started() {
		return false
	}
	if j.pending.Len() > 0 {
		args := j.pending.String()
		if j.argsStr {
			var s string
			if json.Unmarshal([]byte(args), &s) == nil {
				args = s
			}
		}
		e.args(j.index, args)
		j.pending.Reset()
	}
	return true
}

// valueScanner finds where one JSON value ends.
type valueScanner struct {
	depth    int
	inString bool
	escape   bool
	begun    bool
	scalar   bool
}

// step reads one byte of the value and reports whether the value is
// complete with it (strings, objects, arrays).
func (v *valueScanner) step(c byte) bool {
	if !v.begun {
		v.begun = true
		switch c {
		case '"':
			v.inString = true
		case '{', '[':
			v.depth = 1
		default:
			v.scalar = true
		}
		return false
	}
	if v.inString {
		switch {
		case v.escape:
			v.escape = false
		case c == '\\':
			v.escape = true
		case c == '"':
			v.inString = false
			return v.depth == 0
		}
		return false
	}
	switch c {
	case '"':
		v.inString = true
	case '{', '[':
		v.depth++
	case '}', ']':
		v.depth--
		return v.depth == 0
	}
	return false
}

// delimits reports whether c ends a scalar value (numbers, true, false,
// null) without being part of it.
func (v *valueScanner) delimits(c byte) bool {
	return v.scalar && (c == ',' || c == '}' || c == ']' || isSpace(c))
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
