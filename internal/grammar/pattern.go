package grammar

import (
	"fmt"
	"regexp/syntax"
	"unicode/utf8"
)

// patternString compiles a JSON string whose decoded value matches the
// regular expression p (JSON Schema's "pattern": unanchored unless it
// starts with ^ / ends with $). Characters JSON must escape are written
// with one fixed escape each. Go's RE2 syntax is used for the ECMA-262
// pattern: the common subset (classes, groups, alternation, counted
// repetition) means the same; backreferences and lookaround, which no
// automaton can do, fail to parse and are reported.
func patternString(n *nfa, p string) (frag, error) {
	f, err := patternContent(n, p, false)
	if err != nil {
		return frag{}, err
	}
	return n.seq(n.lit(`"`), f, n.lit(`"`)), nil
}

// patternContent is the content of a string matching p: JSON-escaped, or
// with raw set the characters themselves (Gemma's and Qwen's XML
// notations write strings unescaped).
func patternContent(n *nfa, p string, raw bool) (frag, error) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return frag{}, fmt.Errorf("cannot compile pattern %q: %v", p, err)
	}
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	anchoredStart := len(subs) > 0 && subs[0].Op == syntax.OpBeginText
	if anchoredStart {
		subs = subs[1:]
	}
	anchoredEnd := len(subs) > 0 && subs[len(subs)-1].Op == syntax.OpEndText
	if anchoredEnd {
		subs = subs[:len(subs)-1]
	}
	pc := &patComp{n: n, raw: raw}
	var parts []frag
	anyChars := func() frag {
		if raw {
			return n.star(n.rawChar())
		}
		return n.star(n.stringChar())
	}
	if !anchoredStart {
		parts = append(parts, anyChars())
	}
	for _, s := range subs {
		parts = append(parts, pc.re(s))
	}
	if !anchoredEnd {
		parts = append(parts, anyChars())
	}
	f := n.seq(parts...)
	if pc.err != nil {
		return frag{}, fmt.Errorf("pattern %q: %v", p, pc.err)
	}
	return f, nil
}

type patComp struct {
	n   *nfa
	raw bool // characters unescaped
	err error
}

func (pc *patComp) fail(format string, args ...any) frag {
	if pc.err == nil {
		pc.err = fmt.Errorf(format, args...)
	}
	return pc.n.none()
}

func (pc *patComp) re(r *syntax.Regexp) frag {
	n := pc.n
	switch r.Op {
	case syntax.OpEmptyMatch:
		return n.empty()
	case syntax.OpNoMatch:
		return n.none()
	case syntax.OpLiteral:
		if r.Flags&syntax.FoldCase != 0 {
			return pc.fail("case-insensitive matching is not supported")
		}
		fs := make([]frag, len(r.Rune))
		for i, c := range r.Rune {
			fs[i] = pc.runes(c, c)
		}
		return n.seq(fs...)
	case syntax.OpCharClass:
		var alts []frag
		for i := 0; i+1 < len(r.Rune); i += 2 {
			alts = append(alts, pc.runes(r.Rune[i], r.Rune[i+1]))
		}
		return n.alt(alts...)
	case syntax.OpAnyCharNotNL:
		// ECMA-262's '.' also excludes \r, U+2028 and U+2029: leave them
		// out so the text matches under either engine.
		return n.alt(pc.runes(0, '\n'-1), pc.runes('\n'+1, '\r'-1), pc.runes('\r'+1, 0x2027), pc.runes(0x202A, utf8.MaxRune))
	case syntax.OpAnyChar:
		return pc.runes(0, utf8.MaxRune)
	case syntax.OpCapture:
		return pc.re(r.Sub[0])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := r.Min, r.Max
		switch r.Op {
		case syntax.OpStar:
			lo, hi = 0, -1
		case syntax.OpPlus:
			lo, hi = 1, -1
		case syntax.OpQuest:
			lo, hi = 0, 1
		}
		sub := r.Sub[0]
		return n.repeat(func(*nfa) frag { return pc.re(sub) }, lo, hi)
	case syntax.OpConcat:
		fs := make([]frag, len(r.Sub))
		for i, s := range r.Sub {
			fs[i] = pc.re(s)
		}
		return n.seq(fs...)
	case syntax.OpAlternate:
		fs := make([]frag, len(r.Sub))
		for i, s := range r.Sub {
			fs[i] = pc.re(s)
		}
		return n.alt(fs...)
	}
	return pc.fail("%s is not supported inside a pattern", r.Op)
}

// jsonEscapes are the fixed spellings of the characters a JSON string
// cannot hold as themselves.
func jsonEscape(c rune) string {
	switch c {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\t':
		return `\t`
	case '\r':
		return `\r`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	}
	return fmt.Sprintf(`\u%04x`, c)
}

func mustEscape(c rune) bool { return c < 0x20 || c == '"' || c == '\\' }

// runes matches one character in lo..hi as JSON string content.
func (pc *patComp) runes(lo, hi rune) frag {
	n := pc.n
	var alts []frag
	start := lo
	flush := func(end rune) {
		if start <= end {
			utf8Ranges(start, end, func(seq [][2]byte) {
				sets := make([]byteSet, len(seq))
				for i, r := range seq {
					sets[i] = rangeSet(r[0], r[1])
				}
				alts = append(alts, n.classes(sets...))
			})
		}
	}
	for c := lo; c <= hi && c <= '\\'; c++ {
		if !pc.raw && mustEscape(c) {
			flush(c - 1)
			alts = append(alts, n.lit(jsonEscape(c)))
			start = c + 1
		}
	}
	flush(hi)
	if len(alts) == 0 {
		return n.none()
	}
	return n.alt(alts...)
}

// utf8Ranges splits the runes lo..hi (surrogates left out) into byte
// range sequences whose encodings they are exactly (RE2's and Rust
// regex-syntax's Utf8Sequences split).
func utf8Ranges(lo, hi rune, emit func([][2]byte)) {
	if lo > hi {
		return
	}
	if lo <= 0xDFFF && hi >= 0xD800 {
		utf8Ranges(lo, 0xD7FF, emit)
		utf8Ranges(0xE000, hi, emit)
		return
	}
	for _, b := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= b && hi > b {
			utf8Ranges(lo, b, emit)
			utf8Ranges(b+1, hi, emit)
			return
		}
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				utf8Ranges(lo, lo|m, emit)
				utf8Ranges((lo|m)+1, hi, emit)
				return
			}
			if hi&m != m {
				utf8Ranges(lo, (hi&^m)-1, emit)
				utf8Ranges(hi&^m, hi, emit)
				return
			}
		}
	}
	a, b := utf8.AppendRune(nil, lo), utf8.AppendRune(nil, hi)
	seq := make([][2]byte, len(a))
	for i := range a {
		seq[i] = [2]byte{a[i], b[i]}
	}
	emit(seq)
}
