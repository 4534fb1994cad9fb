package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Go's regexp has no lookahead, and the split regexes of GPT-2, Llama 3
// and Qwen2 rely on `\s+(?!\S)`. They are implemented here as hand-written
// scanners that reproduce Oniguruma's leftmost-first backtracking result,
// which is also much faster than a regex engine on the hot path.

const (
	clsL  = 1 << iota // \p{L}
	clsN              // \p{N}
	clsS              // \s (Unicode White_Space)
	clsNL             // \r or \n
)

var asciiClass [128]uint8

func init() {
	for c := 0; c < 128; c++ {
		r := rune(c)
		switch {
		case unicode.IsLetter(r):
			asciiClass[c] = clsL
		case unicode.IsNumber(r):
			asciiClass[c] = clsN
		case unicode.IsSpace(r):
			asciiClass[c] = clsS
		}
	}
	asciiClass['\r'] |= clsNL
	asciiClass['\n'] |= clsNL
}

func runeClass(r rune) uint8 {
	if r < 128 {
		return asciiClass[r]
	}
	switch {
	case unicode.IsLetter(r):
		return clsL
	case unicode.IsNumber(r):
		return clsN
	case unicode.IsSpace(r):
		return clsS
	}
	return 0
}

// at decodes the rune at s[i] (invalid bytes read as U+FFFD, width 1,
// which classifies as punctuation like the symbol it stands for).
func at(s []byte, i int) (rune, int, uint8) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, n := utf8.DecodeRune(s[i:])
	return r, n, runeClass(r)
}

// classAt is the class of the rune at i, or 0xFF past the end.
func classAt(s []byte, i int) uint8 {
	if i >= len(s) {
		return 0xFF
	}
	_, _, c := at(s, i)
	return c
}

// runOf returns the end of the run of runes at i whose class has bit set
// (mask) or, when notMask is true, has none of the bits.
func runOf(s []byte, i int, mask uint8, not bool) int {
	for i < len(s) {
		_, n, c := at(s, i)
		if (c&mask != 0) == not {
			break
		}
		i += n
	}
	return i
}

// contraction matches 's 't 're 've 'm 'll 'd after an apostrophe at s[i]
// and returns the match end, or -1. With fold, ASCII case is ignored and
// U+017F (long s) counts as s, as Oniguruma's case folding does.
func contraction(s []byte, i int, fold bool) int {
	j := i + 1
	if j >= len(s) {
		return -1
	}
	lower := func(c byte) byte {
		if fold && c >= 'A' && c <= 'Z' {
			return c + 32
		}
		return c
	}
	c := lower(s[j])
	switch c {
	case 's', 't', 'm', 'd':
		return j + 1
	case 'r', 'v', 'l':
		if j+1 < len(s) {
			want := byte('e')
			if c == 'l' {
				want = 'l'
			}
			if lower(s[j+1]) == want {
				return j + 2
			}
		}
	case 0xC5: // U+017F is C5 BF
		if fold && j+1 < len(s) && s[j+1] == 0xBF {
			return j + 2
		}
	}
	return -1
}

// spaceRun handles `\s+(?!\S)|\s+` for the whitespace run starting at i:
// the whole run if it ends the text, else all but its last character
// (which then prefixes the next word), else the single character.
func spaceRun(s []byte, i int) int {
	e, last := i, i
	for e < len(s) {
		_, n, c := at(s, e)
		if c&clsS == 0 {
			break
		}
		last = e
		e += n
	}
	if e == len(s) || last == i {
		return e
	}
	return last
}

// llama3Scanner implements
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// (Llama 3); with maxDigits 1 it is Qwen2's variant with \p{N}.
type llama3Scanner struct{ maxDigits int }

func (sc llama3Scanner) find(s []byte, fn func(start, end int)) {
	for i := 0; i < len(s); {
		e := sc.match(s, i)
		fn(i, e)
		i = e
	}
}

func (sc llama3Scanner) match(s []byte, i int) int {
	r, n, c := at(s, i)
	if r == '\'' {
		if e := contraction(s, i, true); e > 0 {
			return e
		}
	}
	if c&clsL != 0 {
		return runOf(s, i, clsL, false)
	}
	if c&(clsN|clsNL) == 0 && classAt(s, i+n)&clsL != 0 && classAt(s, i+n) != 0xFF {
		return runOf(s, i+n, clsL, false)
	}
	if c&clsN != 0 {
		j := i
		for k := 0; k < sc.maxDigits && j < len(s); k++ {
			_, w, cc := at(s, j)
			if cc&clsN == 0 {
				break
			}
			j += w
		}
		return j
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	j := i
	if r == ' ' {
		j += 1
	}
	if j < len(s) && classAt(s, j)&(clsL|clsN|clsS) == 0 {
		j = runOf(s, j, clsL|clsN|clsS, true)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	// Whitespace. `\s*[\r\n]+` ends after the run's last newline.
	e, lastNL := i, -1
	for e < len(s) {
		_, w, cc := at(s, e)
		if cc&clsS == 0 {
			break
		}
		if cc&clsNL != 0 {
			lastNL = e
		}
		e += w
	}
	if lastNL >= 0 {
		return lastNL + 1
	}
	return spaceRun(s, i)
}

// gpt2Scanner implements ByteLevel's built-in regex
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
type gpt2Scanner struct{}

func (gpt2Scanner) find(s []byte, fn func(start, end int)) {
	for i := 0; i < len(s); {
		e := gpt2Match(s, i)
		fn(i, e)
		i = e
	}
}

func gpt2Match(s []byte, i int) int {
	r, n, c := at(s, i)
	if r == '\'' {
		if e := contraction(s, i, false); e > 0 {
			return e
		}
	}
	j, cj := i, c
	if r == ' ' && i+n < len(s) {
		j, cj = i+n, classAt(s, i+n)
	}
	switch {
	case cj&clsL != 0:
		return runOf(s, j, clsL, false)
	case cj&clsN != 0:
		return runOf(s, j, clsN, false)
	case cj&clsS == 0:
		return runOf(s, j, clsL|clsN|clsS, true)
	}
	// Here r is whitespace (a lone trailing space included).
	return spaceRun(s, i)
}
