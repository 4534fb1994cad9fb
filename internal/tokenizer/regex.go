package tokenizer

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Fallback for split regexes without a hand-written scanner. HF compiles
// them with Oniguruma; Go's RE2 has the same leftmost-first semantics for
// the constructs these patterns use, but differs in two ways handled here:
// its \s and \d are ASCII-only (Oniguruma's are Unicode), and it has no
// lookahead. The one lookahead found in tokenizer files is the trailing
// `\s+(?!\S)|\s+` of GPT-style patterns (DeepSeek, Mistral Tekken, ...),
// emulated by matching `(\s+)` and giving back the run's last character
// when text follows, exactly what the backtracking engine ends up doing.

const spaceLookaheadSuffix = `|\s+(?!\S)|\s+`

// onigSpace is Oniguruma's Unicode \s: \t \n \v \f \r, space, U+0085 and
// the separator categories.
const onigSpace = `\t\n\v\f\r \x{85}\p{Zs}\p{Zl}\p{Zp}`

// onigToRE2 rewrites \s, \S, \d and \D to their Unicode meaning.
func onigToRE2(p string) (string, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			e := p[i+1]
			i++
			switch e {
			case 's':
				if inClass {
					b.WriteString(onigSpace)
				} else {
					b.WriteString("[" + onigSpace + "]")
				}
			case 'S':
				if inClass {
					return "", fmt.Errorf(`\S inside a character class`)
				}
				b.WriteString("[^" + onigSpace + "]")
			case 'd':
				b.WriteString(`\p{Nd}`)
			case 'D':
				b.WriteString(`\P{Nd}`)
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
			continue
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
			// A ']' right after '[' or '[^' is a literal.
			if i+1 < len(p) && p[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				b.WriteByte(']')
				i++
			}
			continue
		case c == '[' && inClass:
			return "", fmt.Errorf("nested character class")
		case c == ']' && inClass:
			inClass = false
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

func compileOnig(p string) (matcher, error) {
	if base, ok := strings.CutSuffix(p, spaceLookaheadSuffix); ok {
		conv, err := onigToRE2(base)
		if err != nil {
			return nil, err
		}
		re, err := regexp.Compile(conv + `|([` + onigSpace + `]+)`)
		if err != nil {
			return nil, err
		}
		return &lookaheadMatcher{re: re, group: re.NumSubexp()}, nil
	}
	conv, err := onigToRE2(p)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(conv)
	if err != nil {
		return nil, err
	}
	return regexMatcher{re}, nil
}

// lookaheadMatcher runs a pattern whose last alternative, group, stands
// for `\s+(?!\S)|\s+`.
type lookaheadMatcher struct {
	re    *regexp.Regexp
	group int
}

func (m *lookaheadMatcher) find(s []byte, fn func(start, end int)) {
	for pos := 0; pos <= len(s); {
		loc := m.re.FindSubmatchIndex(s[pos:])
		if loc == nil {
			return
		}
		a, b := pos+loc[0], pos+loc[1]
		if loc[2*m.group] >= 0 && b < len(s) {
			// The greedy run stops before a non-space; (?!\S) makes the
			// engine give back its last character if one remains.
			_, n := utf8.DecodeLastRune(s[a:b])
			if b-n > a {
				b -= n
			}
		}
		fn(a, b)
		if b == a {
			if a >= len(s) {
				return
			}
			_, n := utf8.DecodeRune(s[a:])
			b += n
		}
		pos = b
	}
}
