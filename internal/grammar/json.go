package grammar

// The JSON building blocks. Whitespace policy: a value is written
// compactly, except for at most one space after ',' and ':' (what models
// write in `{"a": 1, "b": 2}`). No whitespace before or after the value and
// none elsewhere: a weak model cannot loop on whitespace, and every step
// makes progress towards the end of the value.

// ws is the optional single space after ',' and ':' (none in Gemma's
// notation, which its template writes without).
func (n *nfa) ws() frag {
	if n.gemmaQuote != "" {
		return n.empty()
	}
	return n.opt(n.lit(" "))
}

// comma is ',' and the optional space.
func (n *nfa) comma() frag { return n.seq(n.lit(","), n.ws()) }

// colon is ':' and the optional space.
func (n *nfa) colon() frag { return n.seq(n.lit(":"), n.ws()) }

// classes matches one byte of each set in turn.
func (n *nfa) classes(sets ...byteSet) frag {
	fs := make([]frag, len(sets))
	for i, s := range sets {
		fs[i] = n.class(s)
	}
	return n.seq(fs...)
}

var (
	cont = rangeSet(0x80, 0xBF)
	// plainASCII are the ASCII bytes a JSON string holds unescaped.
	plainASCII = func() byteSet {
		s := rangeSet(0x20, 0x7F)
		s[0] &^= 1 << '"'
		s[1] &^= 1 << ('\\' - 64)
		return s
	}()
	hexDigit = func() byteSet {
		s := rangeSet('0', '9')
		s.add('a', 'f')
		s.add('A', 'F')
		return s
	}()
	digit  = rangeSet('0', '9')
	digit1 = rangeSet('1', '9')
)

// utf8Seqs are the well-formed UTF-8 sequences of 2 to 4 bytes, byte
// set by byte set (no surrogates, nothing past U+10FFFF). Their first
// sets are disjoint. The content splits (split.go) classify tokens by
// the same table.
var utf8Seqs = [][]byteSet{
	{rangeSet(0xC2, 0xDF), cont},
	{rangeSet(0xE0, 0xE0), rangeSet(0xA0, 0xBF), cont},
	{rangeSet(0xE1, 0xEC), cont, cont},
	{rangeSet(0xED, 0xED), rangeSet(0x80, 0x9F), cont},
	{rangeSet(0xEE, 0xEF), cont, cont},
	{rangeSet(0xF0, 0xF0), rangeSet(0x90, 0xBF), cont, cont},
	{rangeSet(0xF1, 0xF3), cont, cont, cont},
	{rangeSet(0xF4, 0xF4), rangeSet(0x80, 0x8F), cont, cont},
}

// multiByte matches one well-formed UTF-8 sequence of 2 to 4 bytes.
func (n *nfa) multiByte() frag {
	alts := make([]frag, len(utf8Seqs))
	for i, seq := range utf8Seqs {
		alts[i] = n.classes(seq...)
	}
	return n.alt(alts...)
}

// escape is a JSON escape sequence. \u escapes of surrogates are left
// out: a lone one is not a character, and a pair would count as two
// characters here but one for minLength/maxLength.
func (n *nfa) escape() frag {
	simple := byteSet{}
	for _, c := range `"\/bfnrt` {
		simple.add(byte(c), byte(c))
	}
	nonD := rangeSet('0', '9')
	nonD.add('a', 'c')
	nonD.add('A', 'C')
	nonD.add('e', 'f')
	nonD.add('E', 'F')
	d := rangeSet('d', 'd')
	d.add('D', 'D')
	u := n.alt(
		n.classes(nonD, hexDigit, hexDigit, hexDigit),
		n.classes(d, rangeSet('0', '7'), hexDigit, hexDigit),
	)
	return n.seq(n.lit(`\`), n.alt(n.class(simple), n.seq(n.lit("u"), u)))
}

// stringChar is one character of a JSON string's content.
func (n *nfa) stringChar() frag {
	return n.alt(n.class(plainASCII), n.multiByte(), n.escape())
}

// jsonString is a string of lo..hi characters (hi < 0: unbounded).
func (n *nfa) jsonString(lo, hi int) frag {
	return n.seq(n.lit(`"`), n.repeat((*nfa).stringChar, lo, hi), n.lit(`"`))
}

// Digit bounds of generated numbers: an int64 fits, and the exponent
// stays within float64's range (a two-digit exponent on at most 19
// integer digits), which JSON decoders need; the bounds also keep a weak
// model from writing digits forever.
const (
	maxIntDigits  = 19
	maxFracDigits = 17
	maxExpDigits  = 2
)

// integer is -?(0|[1-9][0-9]{0,18}).
func (n *nfa) integer() frag {
	mag := n.alt(n.lit("0"), n.seq(n.class(digit1), n.repeat(func(n *nfa) frag { return n.class(digit) }, 0, maxIntDigits-1)))
	return n.seq(n.opt(n.lit("-")), mag)
}

// number is a JSON number with bounded digit runs.
func (n *nfa) number() frag {
	d := func(n *nfa) frag { return n.class(digit) }
	frac := n.seq(n.lit("."), n.repeat(d, 1, maxFracDigits))
	sign := rangeSet('+', '+')
	sign.add('-', '-')
	e := rangeSet('e', 'e')
	e.add('E', 'E')
	exp := n.seq(n.class(e), n.opt(n.class(sign)), n.repeat(d, 1, maxExpDigits))
	return n.seq(n.integer(), n.opt(frac), n.opt(exp))
}

// anyValue is any JSON value with objects and arrays nested at most
// depth levels (depth 0: scalars only). The automaton has no stack, so
// nesting is bounded; see Options.MaxDepth.
func (n *nfa) anyValue(depth int) frag {
	alts := []frag{
		n.anyString(), n.number(), n.lit("true"), n.lit("false"), n.lit("null"),
	}
	if depth > 0 {
		alts = append(alts, n.anyObject(depth), n.anyArray(depth))
	}
	return n.alt(alts...)
}

// anyObject is an object whose values nest depth-1 more levels.
func (n *nfa) anyObject(depth int) frag {
	member := func(n *nfa) frag { return n.seq(n.anyKey(), n.colon(), n.anyValue(depth-1)) }
	return n.seq(n.lit("{"), n.list(member, 0, -1), n.lit("}"))
}

// anyArray is an array whose items nest depth-1 more levels.
func (n *nfa) anyArray(depth int) frag {
	item := func(n *nfa) frag { return n.anyValue(depth - 1) }
	return n.seq(n.lit("["), n.list(item, 0, -1), n.lit("]"))
}

// list is lo..hi comma-separated copies of g (hi < 0: unbounded).
func (n *nfa) list(g gen, lo, hi int) frag {
	if hi == 0 {
		return n.empty()
	}
	tailHi := -1
	if hi > 0 {
		tailHi = hi - 1
	}
	more := func(n *nfa) frag { return n.seq(n.comma(), g(n)) }
	l := n.seq(g(n), n.repeat(more, max(lo-1, 0), tailHi))
	if lo == 0 {
		return n.opt(l)
	}
	return l
}

// thought is t's thinking prefix: free text that does not contain the
// close marker, the marker, at most two newlines.
func (n *nfa) thought(t *Thinking) frag {
	body := n.seq(n.notContaining(t.Close), n.lit(t.Close), n.repeat(func(n *nfa) frag { return n.lit("\n") }, 0, 2))
	if t.Opened {
		return body
	}
	return n.opt(n.seq(n.lit(t.Open), body))
}

// notContaining is any bytes in which m does not occur: the KMP automaton
// of m, its full match left out.
func (n *nfa) notContaining(m string) frag {
	states := make([]int32, len(m))
	for i := range states {
		states[i] = n.state()
	}
	fail := make([]int, len(m)+1) // KMP failure function
	for i, k := 1, 0; i < len(m); i++ {
		for k > 0 && m[i] != m[k] {
			k = fail[k]
		}
		if m[i] == m[k] {
			k++
		}
		fail[i+1] = k
	}
	for q := range m {
		// Group the bytes by the state they lead to.
		var to [256]int
		for b := range specialLead { // a special's literal is never thought text
			k := q
			for k > 0 && byte(b) != m[k] {
				k = fail[k]
			}
			if byte(b) == m[k] {
				k++
			}
			to[b] = k
		}
		for target := range len(m) {
			var set byteSet
			for b := range specialLead {
				if to[b] == target {
					set.add(byte(b), byte(b))
				}
			}
			if set != (byteSet{}) {
				h := n.state()
				n.eps(states[q], h)
				n.edge(h, set, states[target])
			}
		}
	}
	// Every state may stop: none has matched m.
	out := n.state()
	for _, st := range states {
		n.eps(st, out)
	}
	return frag{states[0], out}
}
