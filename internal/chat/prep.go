package chat

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// prepareSource lexes a template the way jinja2's lexer does under
// transformers' settings (trim_blocks, lstrip_blocks, keep_trailing_newline
// off) and hands the engine an equivalent template it renders faithfully.
//
// Why: the engine's own whitespace handling applies a tag's "-" or
// lstrip/trim_blocks to the nearest *text* segment even when an expression
// sits in between, so "Effort: {{ x }}{%- endif %}" loses the space before
// the expression (GLM's template does exactly this), and its lexer lacks some
// of jinja2's literal syntax. Rather than fork it, whitespace control is
// resolved here and the result is written with no text segments at all:
//
//   - every run of template text (after jinja2's stripping) becomes a string
//     literal expression {{ '...' }}, so the engine has nothing to trim;
//   - tags lose their "-"/"+" markers, comments are dropped, and
//     {% raw %} blocks become literals (the engine has no raw tag);
//   - inside tags, string literals are decoded with Python's escapes (\r,
//     \xhh, \uXXXX, octal, ...) and re-spelled with only \\ and \', numbers
//     are re-spelled in the forms the engine reads (1e16 -> 1.0e16, 1_000 ->
//     1000, 0x1f -> 31), a closing brace gets a space after it so "{}}" does
//     not end a tag early, and the tojson filter is renamed (see
//     tojsonFilterName).
//
// The engine's lstrip/trim_blocks defaults still run, but only ever touch
// text segments, of which the output has none.
func prepareSource(src string) (string, error) {
	// jinja2 treats \r\n and \r as newlines and drops one trailing newline.
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n")

	p := &prep{src: src, lineStarting: true}
	if err := p.run(); err != nil {
		return "", err
	}
	return p.out.String(), nil
}

// tojsonFilterName is what `| tojson` is renamed to. The engine looks a
// filter up among its built-ins first and only then among the render's
// values (its extension point), so its own tojson, which is not
// transformers' (Go float spelling; sorted keys and HTML escaping when
// indenting), cannot be shadowed; the renamed filter is supplied by Render.
const tojsonFilterName = "__mlxcel_tojson"

type prep struct {
	src string
	pos int
	out strings.Builder
	// lineStarting mirrors jinja2: whether the text consumed with the last
	// tag ended in a newline, so a following tag at the start of the next
	// data run counts as beginning a line for lstrip_blocks.
	lineStarting bool
}

func (p *prep) errorf(at int, format string, args ...any) error {
	line := 1 + strings.Count(p.src[:at], "\n")
	return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))
}

func (p *prep) run() error {
	for p.pos < len(p.src) {
		open := nextOpener(p.src, p.pos)
		if open < 0 {
			p.emitText(p.src[p.pos:])
			return nil
		}
		text := p.src[p.pos:open]
		kind := p.src[open+1]
		j := open + 2
		var sign byte
		if j < len(p.src) && (p.src[j] == '-' || p.src[j] == '+') {
			sign = p.src[j]
			j++
		}
		p.emitText(p.leftStrip(text, sign, kind != '{'))

		var err error
		switch {
		case kind == '#':
			err = p.comment(open, j)
		case kind == '%' && p.rawBegin(j) >= 0:
			err = p.raw(open, p.rawBegin(j))
		default:
			err = p.tag(open, j, kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// nextOpener finds the next "{{", "{%" or "{#" at or after from.
func nextOpener(s string, from int) int {
	for i := from; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
	}
	return -1
}

// leftStrip applies what jinja2 does to the text before a tag: "-" strips
// all trailing whitespace; otherwise, for block and comment tags (not
// variables) not marked "+", lstrip_blocks removes the whitespace between
// the last line start and the tag.
func (p *prep) leftStrip(text string, sign byte, isBlock bool) string {
	if sign == '-' {
		return strings.TrimRightFunc(text, isPySpace)
	}
	if sign == '+' || !isBlock {
		return text
	}
	lpos := strings.LastIndexByte(text, '\n') + 1
	if (lpos > 0 || p.lineStarting) && lpos < len(text) && strings.TrimLeftFunc(text[lpos:], isPySpace) == "" {
		return text[:lpos]
	}
	return text
}

// endTag consumes a tag closer at p.pos (already positioned just past it,
// given its sign) and the whitespace jinja2 eats after it: everything for
// "-", nothing for "+", one newline otherwise when trimNewline is set.
func (p *prep) endTag(sign byte, trimNewline bool) {
	start := p.pos
	switch {
	case sign == '-':
		rest := strings.TrimLeftFunc(p.src[p.pos:], isPySpace)
		p.pos = len(p.src) - len(rest)
	case sign == '+':
	case trimNewline && strings.HasPrefix(p.src[p.pos:], "\n"):
		p.pos++
	}
	// The consumed closer itself never ends in a newline, so only the
	// stripped whitespace can make the next text start a line.
	p.lineStarting = p.pos > start && p.src[p.pos-1] == '\n'
}

func (p *prep) comment(open, j int) error {
	end := strings.Index(p.src[j:], "#}")
	if end < 0 {
		return p.errorf(open, "missing end of comment tag")
	}
	end += j
	var sign byte
	if end > j && (p.src[end-1] == '-' || p.src[end-1] == '+') {
		sign = p.src[end-1]
	}
	p.pos = end + 2
	p.endTag(sign, true)
	return nil
}

// rawBegin matches the rest of `{% raw %}` (after the opener and sign) at j
// and returns the index just past its closer, or -1.
func (p *prep) rawBegin(j int) int {
	k := skipPySpace(p.src, j)
	if !strings.HasPrefix(p.src[k:], "raw") {
		return -1
	}
	k = skipPySpace(p.src, k+3)
	switch {
	case strings.HasPrefix(p.src[k:], "-%}"):
		return k + 3
	case strings.HasPrefix(p.src[k:], "%}"):
		return k + 2
	}
	return -1
}

// raw copies a {% raw %} block's content as text. jinja2 strips after the
// opening tag only for "-%}" (no trim_blocks there) and treats the content
// like text before the closing {% endraw %} tag.
func (p *prep) raw(open, afterOpen int) error {
	p.pos = afterOpen
	if p.src[afterOpen-3] == '-' {
		p.endTag('-', false)
	} else {
		p.lineStarting = false
	}
	for k := p.pos; ; k++ {
		idx := strings.Index(p.src[k:], "{%")
		if idx < 0 {
			return p.errorf(open, "missing end of raw directive")
		}
		k += idx
		j := k + 2
		var sign byte
		if j < len(p.src) && (p.src[j] == '-' || p.src[j] == '+') {
			sign = p.src[j]
			j++
		}
		j = skipPySpace(p.src, j)
		if !strings.HasPrefix(p.src[j:], "endraw") {
			continue
		}
		j = skipPySpace(p.src, j+6)
		var endSign byte
		switch {
		case strings.HasPrefix(p.src[j:], "-%}"), strings.HasPrefix(p.src[j:], "+%}"):
			endSign = p.src[j]
			j += 3
		case strings.HasPrefix(p.src[j:], "%}"):
			j += 2
		default:
			continue
		}
		p.emitText(p.leftStrip(p.src[p.pos:k], sign, true))
		p.pos = j
		p.endTag(endSign, true)
		return nil
	}
}

// emitText writes text as a string literal expression.
func (p *prep) emitText(text string) {
	if text == "" {
		return
	}
	p.out.WriteString("{{ ")
	writeEngineString(&p.out, text)
	p.out.WriteString(" }}")
}

// writeEngineString spells s as a literal the engine reads back exactly: it
// only understands a few escapes, so everything but \ and ' is left raw.
func writeEngineString(sb *strings.Builder, s string) {
	sb.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '\'' {
			sb.WriteByte('\\')
		}
		sb.WriteByte(s[i])
	}
	sb.WriteByte('\'')
}

// tag copies a {{ }} or {% %} tag token by token (see prepareSource). Like
// jinja2, the closer only counts outside brackets and strings.
func (p *prep) tag(open, j int, kind byte) error {
	closer := "}}"
	if kind == '%' {
		closer = "%}"
	}
	p.out.WriteString(p.src[open:open+2] + " ")
	depth := 0
	afterPipe := false // the previous token was the filter operator
	for k := j; ; {
		if k >= len(p.src) {
			return p.errorf(open, "unclosed tag")
		}
		c := p.src[k]
		if depth == 0 {
			if (c == '-' || c == '+' && kind == '%') && strings.HasPrefix(p.src[k+1:], closer) {
				p.out.WriteString(" " + closer)
				p.pos = k + 3
				p.endTag(c, kind == '%')
				return nil
			}
			if strings.HasPrefix(p.src[k:], closer) {
				p.out.WriteString(" " + closer)
				p.pos = k + 2
				p.endTag(0, kind == '%')
				return nil
			}
		}
		switch {
		case isPySpace(rune(c)):
			p.out.WriteByte(c)
			k++
			continue
		case c == '\'' || c == '"':
			end, s, err := decodePyString(p.src, k)
			if err != nil {
				return p.errorf(k, "%v", err)
			}
			writeEngineString(&p.out, s)
			k = end
		case c >= '0' && c <= '9' && (k == 0 || p.src[k-1] != '.'):
			n, lit := readNumber(p.src[k:])
			p.out.WriteString(lit)
			k += n
		case isIdentStart(c):
			e := k + 1
			for e < len(p.src) && isIdentByte(p.src[e]) {
				e++
			}
			if afterPipe && p.src[k:e] == "tojson" {
				p.out.WriteString(tojsonFilterName)
			} else {
				p.out.WriteString(p.src[k:e])
			}
			k = e
		default:
			switch c {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth = max(depth-1, 0)
			}
			p.out.WriteByte(c)
			if c == '}' {
				p.out.WriteByte(' ') // keep "}}" from closing the tag in the engine
			}
			k++
		}
		afterPipe = c == '|'
	}
}

func isPySpace(r rune) bool {
	// str.isspace() also counts the ASCII separators U+001C..U+001F.
	return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f
}

func skipPySpace(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isPySpace(r) {
			break
		}
		i += n
	}
	return i
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentByte(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9'
}

// decodePyString reads the string literal opening at s[i] and decodes it as
// jinja2 does (Python's unicode-escape rules). It returns the index past the
// closing quote.
func decodePyString(s string, i int) (int, string, error) {
	quote := s[i]
	var b strings.Builder
	for k := i + 1; k < len(s); k++ {
		c := s[k]
		if c == quote {
			return k + 1, b.String(), nil
		}
		if c != '\\' || k+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		k++
		switch e := s[k]; e {
		case '\n': // line continuation
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if k+width >= len(s) {
				return 0, "", fmt.Errorf("truncated \\%c escape", e)
			}
			v, err := strconv.ParseUint(s[k+1:k+1+width], 16, 32)
			if err != nil || v > unicode.MaxRune {
				return 0, "", fmt.Errorf("invalid \\%c escape", e)
			}
			b.WriteRune(rune(v))
			k += width
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := 1
			for n < 3 && k+n < len(s) && s[k+n] >= '0' && s[k+n] <= '7' {
				n++
			}
			v, _ := strconv.ParseUint(s[k:k+n], 8, 32)
			b.WriteRune(rune(v))
			k += n - 1
		default:
			// Unknown escapes keep their backslash, as in Python.
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return 0, "", fmt.Errorf("unterminated string literal")
}

// readNumber reads a jinja2 number literal at the start of s and returns its
// length and a spelling the engine parses to the same value: the engine only
// knows plain decimal ints and floats with a fractional part.
func readNumber(s string) (int, string) {
	digits := func(i int) int { // (\d+_)*\d+ starting at i; returns the end
		j := i
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '_' && j > i && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9') {
			j++
		}
		return j
	}
	clean := func(x string) string { return strings.ReplaceAll(x, "_", "") }

	// Float: digits, then a fraction and/or an exponent.
	intEnd := digits(0)
	i := intEnd
	frac := ""
	if i+1 < len(s) && s[i] == '.' && s[i+1] >= '0' && s[i+1] <= '9' {
		e := digits(i + 1)
		frac = s[i+1 : e]
		i = e
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			e := digits(j)
			if frac == "" {
				frac = "0"
			}
			return e, clean(s[:intEnd]) + "." + clean(frac) + "e" + clean(s[i+1:e])
		}
	}
	if frac != "" {
		return i, clean(s[:intEnd]) + "." + clean(frac)
	}

	// Integer: 0b / 0o / 0x prefixes or decimal.
	if len(s) > 2 && s[0] == '0' {
		base := map[byte]int{'b': 2, 'B': 2, 'o': 8, 'O': 8, 'x': 16, 'X': 16}[s[1]]
		if base != 0 {
			j := 2
			for j < len(s) && (s[j] == '_' || isDigitIn(s[j], base)) {
				j++
			}
			if v, err := strconv.ParseInt(clean(s[2:j]), base, 64); err == nil {
				return j, strconv.FormatInt(v, 10)
			}
		}
	}
	return intEnd, clean(s[:intEnd])
}

func isDigitIn(c byte, base int) bool {
	v, err := strconv.ParseUint(string(c), base, 8)
	return err == nil && int(v) < base
}
