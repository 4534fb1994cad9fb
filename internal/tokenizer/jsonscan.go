package tokenizer

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonReader is a minimal pull scanner for the large parts of tokenizer.json
// (vocab and merges: hundreds of thousands of entries, tens of MB), which
// encoding/json decodes several times too slowly for the load-time target.
// Small sections are captured raw and handed to encoding/json.
type jsonReader struct {
	data []byte
	pos  int
	tmp  []byte // unescape buffer for readStringView
}

func (r *jsonReader) errorf(format string, args ...any) error {
	return fmt.Errorf("json offset %d: %s", r.pos, fmt.Sprintf(format, args...))
}

func (r *jsonReader) skipWS() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it (0 at EOF).
func (r *jsonReader) peek() byte {
	r.skipWS()
	if r.pos >= len(r.data) {
		return 0
	}
	return r.data[r.pos]
}

func (r *jsonReader) expect(c byte) error {
	if r.peek() != c {
		return r.errorf("expected %q", c)
	}
	r.pos++
	return nil
}

// next consumes c if it is the next byte.
func (r *jsonReader) next(c byte) bool {
	if r.peek() == c {
		r.pos++
		return true
	}
	return false
}

// readStringView returns the decoded string. It aliases r.data when the
// string has no escapes, else r.tmp; either way it is only valid until the
// next call.
func (r *jsonReader) readStringView() ([]byte, error) {
	if err := r.expect('"'); err != nil {
		return nil, err
	}
	start := r.pos
	for i := start; i < len(r.data); i++ {
		switch r.data[i] {
		case '"':
			r.pos = i + 1
			return r.data[start:i], nil
		case '\\':
			r.pos = start
			var err error
			r.tmp, err = r.unescape(r.tmp[:0])
			return r.tmp, err
		}
	}
	return nil, r.errorf("unterminated string")
}

// appendString decodes the next string onto dst.
func (r *jsonReader) appendString(dst []byte) ([]byte, error) {
	if err := r.expect('"'); err != nil {
		return dst, err
	}
	start := r.pos
	for i := start; i < len(r.data); i++ {
		switch r.data[i] {
		case '"':
			r.pos = i + 1
			return append(dst, r.data[start:i]...), nil
		case '\\':
			return r.unescape(dst)
		}
	}
	return dst, r.errorf("unterminated string")
}

// unescape decodes from r.pos (just after the opening quote) to the
// closing quote.
func (r *jsonReader) unescape(dst []byte) ([]byte, error) {
	d := r.data
	i := r.pos
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			r.pos = i + 1
			return dst, nil
		case c != '\\':
			dst = append(dst, c)
			i++
			continue
		}
		if i+1 >= len(d) {
			break
		}
		e := d[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r1, ok := hex4(d, i)
			if !ok {
				r.pos = i
				return dst, r.errorf("bad \\u escape")
			}
			i += 4
			if utf16.IsSurrogate(r1) {
				// A pair spells one rune; a lone half becomes U+FFFD as in
				// encoding/json.
				if i+6 <= len(d) && d[i] == '\\' && d[i+1] == 'u' {
					if r2, ok := hex4(d, i+2); ok {
						if dec := utf16.DecodeRune(r1, r2); dec != utf8.RuneError {
							dst = utf8.AppendRune(dst, dec)
							i += 6
							continue
						}
					}
				}
				r1 = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r1)
		default:
			r.pos = i
			return dst, r.errorf("bad escape \\%c", e)
		}
	}
	r.pos = i
	return dst, r.errorf("unterminated string")
}

func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d[i:i+4]), 16, 32)
	return rune(v), err == nil
}

func (r *jsonReader) readInt() (int64, error) {
	r.skipWS()
	start := r.pos
	if r.pos < len(r.data) && r.data[r.pos] == '-' {
		r.pos++
	}
	var v int64
	digits := 0
	for r.pos < len(r.data) && r.data[r.pos] >= '0' && r.data[r.pos] <= '9' {
		v = v*10 + int64(r.data[r.pos]-'0')
		r.pos++
		digits++
		if digits > 18 {
			return 0, r.errorf("integer too large")
		}
	}
	if digits == 0 {
		return 0, r.errorf("expected integer")
	}
	if r.pos < len(r.data) {
		switch r.data[r.pos] {
		case '.', 'e', 'E':
			return 0, r.errorf("expected integer")
		}
	}
	if r.data[start] == '-' {
		v = -v
	}
	return v, nil
}

// skipValue consumes one JSON value of any kind and returns its raw bytes.
func (r *jsonReader) skipValue() ([]byte, error) {
	r.skipWS()
	start := r.pos
	if r.pos >= len(r.data) {
		return nil, r.errorf("unexpected end of input")
	}
	switch c := r.data[r.pos]; c {
	case '"':
		if _, err := r.readStringView(); err != nil {
			return nil, err
		}
	case '{', '[':
		// Track nesting only; strings are skipped so brackets inside them
		// do not count.
		depth := 0
		for r.pos < len(r.data) {
			switch r.data[r.pos] {
			case '{', '[':
				depth++
				r.pos++
			case '}', ']':
				depth--
				r.pos++
				if depth == 0 {
					return r.data[start:r.pos], nil
				}
			case '"':
				if err := r.skipString(); err != nil {
					return nil, err
				}
			default:
				r.pos++
			}
		}
		return nil, r.errorf("unterminated %c", c)
	default:
		for r.pos < len(r.data) {
			switch r.data[r.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return r.data[start:r.pos], nil
			}
			r.pos++
		}
	}
	return r.data[start:r.pos], nil
}

func (r *jsonReader) skipString() error {
	r.pos++ // opening quote
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case '"':
			r.pos++
			return nil
		case '\\':
			r.pos += 2
		default:
			r.pos++
		}
	}
	return errors.New("unterminated string")
}

// forEachKey walks an object, calling fn with each key; fn must consume the
// value.
func (r *jsonReader) forEachKey(fn func(key []byte) error) error {
	if err := r.expect('{'); err != nil {
		return err
	}
	if r.next('}') {
		return nil
	}
	for {
		key, err := r.readStringView()
		if err != nil {
			return err
		}
		if err := r.expect(':'); err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return err
		}
		if r.next(',') {
			continue
		}
		return r.expect('}')
	}
}
