package reasoning

import "strings"

// gpt-oss writes OpenAI's harmony format: messages of channels, each a
// header, <|message|>, a body and a terminator,
//
//	<|channel|>analysis<|message|>The user asks...<|end|>
//	<|start|>assistant<|channel|>final<|message|>It is 4.<|return|>
//
// (the generation prompt ends in "<|start|>assistant"; <|return|> and
// <|call|> are stop tokens, so the last message ends with the text).
// The analysis channel is the reasoning, the final channel's body the
// content; any other message (a commentary tool call, "to=functions.x")
// is passed on whole, markup included, for the tool-call parser.
const (
	hStart   = "<|start|>"
	hChannel = "<|channel|>"
	hMessage = "<|message|>"
	hEnd     = "<|end|>"
	hReturn  = "<|return|>"
	hCall    = "<|call|>"
)

type harmony struct {
	buf     string
	inBody  bool
	channel string // of the body being read: analysis, final, or "" (passed on raw)
	plain   bool   // the model did not write harmony: all content
}

func (h *harmony) push(text string, final bool) Piece {
	h.buf += text
	var p Piece
	for h.buf != "" {
		if h.plain {
			p.Content += h.buf
			h.buf = ""
			break
		}
		if !h.inBody {
			if !h.header(final, &p) {
				break
			}
			continue
		}
		if !h.body(final, &p) {
			break
		}
	}
	return p
}

// header reads up to <|message|> and picks the channel; false when more
// text is needed.
func (h *harmony) header(final bool, p *Piece) bool {
	i := strings.Index(h.buf, hMessage)
	if i < 0 {
		rest := strings.TrimLeft(h.buf, " \n")
		looks := strings.HasPrefix(rest, "<|") || strings.HasPrefix(rest, "to=") || strings.HasPrefix(hStart, rest)
		if final || !looks || len(h.buf) > 512 {
			h.plain = true // no harmony header: the text is the answer
			return true
		}
		return false
	}
	head := h.buf[:i]
	h.buf = h.buf[i+len(hMessage):]
	h.inBody = true
	ch := ""
	if j := strings.Index(head, hChannel); j >= 0 {
		ch = strings.Fields(head[j+len(hChannel):] + " ")[0]
		if k := strings.Index(ch, "<|"); k >= 0 {
			ch = ch[:k]
		}
	}
	switch {
	case strings.Contains(head, "to=") && !strings.Contains(head, "to=assistant"):
		h.channel = "" // a call: passed on raw
		p.Content += head + hMessage
	case ch == "analysis" || ch == "final":
		h.channel = ch
	default:
		h.channel = "final" // commentary to the user: content
	}
	return true
}

// body passes the message body on up to its terminator; false when more
// text is needed.
func (h *harmony) body(final bool, p *Piece) bool {
	end, term := -1, ""
	for _, t := range []string{hEnd, hReturn, hCall} {
		if i := strings.Index(h.buf, t); i >= 0 && (end < 0 || i < end) {
			end, term = i, t
		}
	}
	text, rest := h.buf, ""
	if end >= 0 {
		text, rest = h.buf[:end], h.buf[end+len(term):]
	} else if !final {
		keep := 0
		for _, t := range []string{hEnd, hReturn, hCall} {
			keep = max(keep, partialSuffix(h.buf, t))
		}
		text, rest = h.buf[:len(h.buf)-keep], h.buf[len(h.buf)-keep:]
	}
	switch h.channel {
	case "analysis":
		p.Reasoning += text
	case "final":
		p.Content += text
	default:
		p.Content += text
		if end >= 0 {
			p.Content += term
		}
	}
	h.buf = rest
	if end >= 0 {
		h.inBody = false
		return true
	}
	return false
}
