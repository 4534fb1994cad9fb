package toolcall

import (
	"encoding/json"
	"strconv"
	"strings"
)

// setTypes gives the parser the tools' parameter types.
func (q *qwenXML) setTypes(f func(fn, param string) string) { q.types = f }

// Qwen 3.5, Qwen 3.6 and Qwen3-Coder write each call as XML inside the
// Hermes tags, one parameter per element, values as plain text:
//
//	<tool_call>
//	<function=get_weather>
//	<parameter=city>
//	Paris
//	</parameter>
//	</function>
//	</tool_call>
//
// The template prints strings as they are, numbers and booleans with
// Python's str() and objects and lists as JSON, so a value is turned back
// into JSON by the tool's parameter schema when the request gave one (a
// "string" parameter stays a string even if it reads as a number; one of
// no single type is JSON when it parses, as vLLM reads it, so a quoted
// string is that string), else by its look.
const (
	xmlFunction  = "<function="
	xmlFuncEnd   = "</function>"
	xmlParameter = "<parameter="
	xmlParamEnd  = "</parameter>"
)

const (
	xText = iota
	xFunction
	xParams
	xClose
)

type qwenXML struct {
	st     int
	index  int
	name   string
	params int
	raw    string // markup read since <tool_call>, for a failed call
	types  func(fn, param string) string
	json   *jsonCall // a Hermes-style JSON call inside the tags
}

func (q *qwenXML) push(buf string, final bool, e *emitter) (int, bool) {
	switch q.st {
	case xText:
		at, n := holdText(buf, final, e, hermesOpen)
		if at < 0 {
			return n, false
		}
		q.st, q.raw = xFunction, hermesOpen
		return at + len(hermesOpen), true
	case xFunction:
		if q.json != nil {
			return q.jsonBody(buf, final, e)
		}
		return q.function(buf, final, e)
	case xParams:
		return q.param(buf, final, e)
	}
	return q.close(buf, final)
}

// function reads "<function=NAME>".
func (q *qwenXML) function(buf string, final bool, e *emitter) (int, bool) {
	rest := strings.TrimLeft(buf, " \t\r\n")
	lead := len(buf) - len(rest)
	end := strings.IndexByte(rest, '>')
	switch {
	case strings.HasPrefix(rest, xmlFunction) && end > len(xmlFunction):
		q.name = strings.TrimSpace(rest[len(xmlFunction):end])
		q.index, q.params, q.st = e.start(q.name), 0, xParams
		e.args(q.index, "{")
		return lead + end + 1, true
	case strings.HasPrefix(rest, "{"):
		// The Hermes form (a forced call's grammar writes it, older
		// checkpoints too): read it as the hermes parser does.
		q.json = newJSONCall()
		return lead, true
	case !final && (strings.HasPrefix(xmlFunction, rest) || strings.HasPrefix(rest, xmlFunction) && end < 0 && len(rest) < 256):
		return 0, false
	}
	e.text(q.raw) // not a call: the markup was content
	q.st = xText
	return 0, true
}

// jsonBody reads a JSON call object, then the closing tag.
func (q *qwenXML) jsonBody(buf string, final bool, e *emitter) (int, bool) {
	n, done, failed := q.json.feed(buf, e)
	switch {
	case done || (failed && q.json.started()):
		q.json, q.st = nil, xClose
		return n, true
	case failed || (final && !q.json.started()):
		e.text(q.raw + q.json.raw.String())
		q.json, q.st = nil, xText
		return n, true
	}
	return n, false
}

// param converts one complete "<parameter=K>\nV\n</parameter>", or ends
// the call at "</function>".
func (q *qwenXML) param(buf string, final bool, e *emitter) (int, bool) {
	rest := strings.TrimLeft(buf, " \t\r\n")
	lead := len(buf) - len(rest)
	switch {
	case strings.HasPrefix(rest, xmlFuncEnd):
		e.args(q.index, "}")
		q.st = xClose
		return lead + len(xmlFuncEnd), true
	case strings.HasPrefix(rest, xmlParameter):
		end := strings.IndexByte(rest, '>')
		stop := strings.Index(rest, xmlParamEnd)
		if end < 0 || stop < 0 {
			if final {
				if end > 0 {
					q.pair(rest[len(xmlParameter):end], rest[end+1:], e)
				}
				e.args(q.index, "}")
				return len(buf), false
			}
			return lead, false
		}
		q.pair(rest[len(xmlParameter):end], rest[end+1:stop], e)
		return lead + stop + len(xmlParamEnd), true
	case rest == "" || !final && (strings.HasPrefix(xmlFuncEnd, rest) || strings.HasPrefix(xmlParameter, rest)):
		if final {
			e.args(q.index, "}")
		}
		return lead, false
	}
	// Anything else ends the call as it stands.
	e.args(q.index, "}")
	q.st = xClose
	return lead, true
}

func (q *qwenXML) pair(key, value string, e *emitter) {
	key = strings.TrimSpace(key)
	value = strings.TrimPrefix(value, "\n")
	value = strings.TrimSuffix(value, "\n")
	typ := ""
	if q.types != nil {
		typ = q.types(q.name, key)
	}
	k, _ := json.Marshal(key)
	sep := ""
	if q.params > 0 {
		sep = ", "
	}
	q.params++
	e.args(q.index, sep+string(k)+": "+xmlValue(value, typ))
}

// close skips to the end of </tool_call>.
func (q *qwenXML) close(buf string, final bool) (int, bool) {
	rest := strings.TrimLeft(buf, " \t\r\n")
	lead := len(buf) - len(rest)
	switch {
	case strings.HasPrefix(rest, hermesClose):
		q.st = xText
		return lead + len(hermesClose), true
	case !final && strings.HasPrefix(hermesClose, rest):
		return lead, false
	}
	q.st = xText
	return lead, true
}

// xmlValue turns a parameter's text into JSON: by the schema type when
// known, else JSON if it parses as JSON, Python's True/False/None as
// booleans and null, anything else a string.
func xmlValue(v, typ string) string {
	str := func() string { b, _ := json.Marshal(v); return string(b) }
	t := strings.TrimSpace(v)
	switch typ {
	case "string":
		return str()
	case "integer", "number":
		if _, err := strconv.ParseFloat(t, 64); err == nil && json.Valid([]byte(t)) {
			return t
		}
		return str()
	case "boolean":
		switch strings.ToLower(t) {
		case "true":
			return "true"
		case "false":
			return "false"
		}
		return str()
	}
	if typ == "json" && json.Valid([]byte(t)) {
		return t
	}
	switch t {
	case "True":
		return "true"
	case "False":
		return "false"
	case "None":
		return "null"
	}
	if t != "" && t[0] != '"' && json.Valid([]byte(t)) {
		return t // a number, an object or a list the template wrote as JSON
	}
	return str()
}
