package toolcall

import "strings"

// gpt-oss (OpenAI's harmony format) calls a function with a commentary
// message addressed to it, the arguments as the JSON body:
//
//	<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>
//
// (the recipient may also follow the channel). The reasoning parser
// "harmony" has already taken the analysis and final channels out; what
// reaches this parser is the final text and such call messages, whole.
const (
	harmonyStart   = "<|start|>"
	harmonyChannel = "<|channel|>"
	harmonyMessage = "<|message|>"
	harmonyCall    = "<|call|>"
	harmonyEnd     = "<|end|>"
	harmonyTo      = "to=functions."
)

const (
	hText = iota
	hHeader
	hBody
)

type harmonyCalls struct {
	st    int
	index int
}

func (h *harmonyCalls) push(buf string, final bool, e *emitter) (int, bool) {
	switch h.st {
	case hText:
		at, n := holdText(buf, final, e, harmonyStart, harmonyChannel, harmonyTo)
		if at < 0 {
			return n, false
		}
		h.st = hHeader
		return at, true
	case hHeader:
		return h.header(buf, final, e)
	}
	return h.body(buf, final, e)
}

// header reads up to <|message|>: a call when it names a function.
func (h *harmonyCalls) header(buf string, final bool, e *emitter) (int, bool) {
	i := strings.Index(buf, harmonyMessage)
	if i < 0 {
		if final || len(buf) > 512 {
			e.text(buf)
			h.st = hText
			return len(buf), false
		}
		return 0, false
	}
	head := buf[:i]
	j := strings.Index(head, harmonyTo)
	if j < 0 {
		e.text(buf[:i+len(harmonyMessage)]) // not a call: content as written
		h.st = hText
		return i + len(harmonyMessage), true
	}
	name := head[j+len(harmonyTo):]
	if k := strings.IndexAny(name, " <"); k >= 0 {
		name = name[:k]
	}
	h.index, h.st = e.start(name), hBody
	return i + len(harmonyMessage), true
}

// body passes the arguments on up to <|call|> (or <|end|>).
func (h *harmonyCalls) body(buf string, final bool, e *emitter) (int, bool) {
	end, term := -1, ""
	for _, t := range []string{harmonyCall, harmonyEnd} {
		if i := strings.Index(buf, t); i >= 0 && (end < 0 || i < end) {
			end, term = i, t
		}
	}
	if end >= 0 {
		e.args(h.index, strings.TrimSpace(buf[:end]))
		h.st = hText
		return end + len(term), true
	}
	keep := 0
	if !final {
		keep = max(partialSuffix(buf, harmonyCall), partialSuffix(buf, harmonyEnd))
	}
	piece := buf[:len(buf)-keep]
	if e.argsLen[h.index] == 0 {
		piece = strings.TrimLeft(piece, " \n")
	}
	e.args(h.index, piece)
	return len(buf) - keep, false
}
