package grammar

import "strings"

// Value notations besides JSON: Gemma 4 writes a call's arguments in its
// own (its chat template's format_argument), read back by
// internal/toolcall's gemma4 parser:
//
//	{city:<|"|>Paris<|"|>,days:3,tags:[<|"|>a<|"|>]}
//
// keys bare (quoted when not a plain word), strings between <|"|> with
// no escapes, no spaces. Qwen's XML calls write a string parameter as its
// bare characters (rawChar).

// gemmaQuoteText is Gemma's string delimiter as text: a string's
// characters must not spell it, or the parser would end the string there.
const gemmaQuoteText = `<|"|>`

// rawASCII are the ASCII characters of an unescaped string: printable,
// tab and newlines.
var rawASCII = func() byteSet {
	s := rangeSet(0x20, 0x7F)
	s.add('\t', '\n')
	s.add('\r', '\r')
	return s
}()

// rawChar is one character of an unescaped string.
func (n *nfa) rawChar() frag { return n.alt(n.class(rawASCII), n.multiByte()) }

// anyString is a string of any length in the notation.
func (n *nfa) anyString() frag {
	if q := n.gemmaQuote; q != "" {
		return n.seq(n.lit(q), n.avoid(n.star(n.rawChar()), gemmaQuoteText), n.lit(q))
	}
	return n.jsonString(0, -1)
}

// anyKey is a generated object key: any JSON string, or in Gemma's
// notation a quoted one of keyChars (which cannot spell the delimiter).
func (n *nfa) anyKey() frag {
	if q := n.gemmaQuote; q != "" {
		return n.seq(n.lit(q), n.star(n.class(keyChars)), n.lit(q))
	}
	return n.jsonString(0, -1)
}

// keyText is how a declared key is written.
func (n *nfa) keyText(k string) string {
	if n.gemmaQuote == "" {
		return quote(k)
	}
	return gemmaKey(k, n.gemmaQuote)
}

// valueText is a const or enum value in the notation.
func (n *nfa) valueText(v *jval) string {
	if n.gemmaQuote == "" {
		return v.text()
	}
	var sb strings.Builder
	v.gemma(&sb, n.gemmaQuote)
	return sb.String()
}

// gemmaKey writes k bare when it is a plain word (what the parser reads
// up to the colon), else quoted.
func gemmaKey(k, q string) string {
	if k != "" && strings.Trim(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == "" {
		return k
	}
	return q + k + q
}

// gemma writes v in Gemma's notation, strings between q.
func (v *jval) gemma(sb *strings.Builder, q string) {
	switch v.kind {
	case 'o':
		sb.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(gemmaKey(k, q))
			sb.WriteByte(':')
			v.vals[i].gemma(sb, q)
		}
		sb.WriteByte('}')
	case 'a':
		sb.WriteByte('[')
		for i, x := range v.vals {
			if i > 0 {
				sb.WriteByte(',')
			}
			x.gemma(sb, q)
		}
		sb.WriteByte(']')
	case 's':
		sb.WriteString(q + v.str + q)
	default:
		v.encode(sb)
	}
}
