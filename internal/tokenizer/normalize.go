package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites one segment of input text (the parts between added
// tokens). It may return its argument unchanged.
type normalizer interface {
	normalize(s []byte) []byte
}

// typeOf reads the "type" tag of a component.
func typeOf(raw []byte) (string, error) {
	var h struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", err
	}
	return h.Type, nil
}

func isNull(raw []byte) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// pattern is the {"String": ...} / {"Regex": ...} object used by Split and
// Replace.
type pattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

func (p pattern) describe() string {
	if p.Regex != nil {
		return fmt.Sprintf("Regex %q", *p.Regex)
	}
	if p.String != nil {
		return fmt.Sprintf("String %q", *p.String)
	}
	return "empty pattern"
}

func parseNormalizer(raw []byte) (normalizer, error) {
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "NFC":
		return formNorm{norm.NFC}, nil
	case "NFD":
		return formNorm{norm.NFD}, nil
	case "NFKC":
		return formNorm{norm.NFKC}, nil
	case "NFKD":
		return formNorm{norm.NFKD}, nil
	case "Lowercase":
		return lowercaseNorm{}, nil
	case "StripAccents":
		return stripAccentsNorm{}, nil
	case "Strip":
		var c struct {
			Left  bool `json:"strip_left"`
			Right bool `json:"strip_right"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		return stripNorm{c.Left, c.Right}, nil
	case "Prepend":
		var c struct {
			Prepend string `json:"prepend"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		return prependNorm{c.Prepend}, nil
	case "Replace":
		var c struct {
			Pattern pattern `json:"pattern"`
			Content string  `json:"content"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		rep, err := newReplacer(c.Pattern, c.Content)
		if err != nil {
			return nil, err
		}
		return replaceNorm{rep}, nil
	case "Sequence":
		var c struct {
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		var seq seqNorm
		for _, r := range c.Normalizers {
			n, err := parseNormalizer(r)
			if err != nil {
				return nil, err
			}
			seq = append(seq, n)
		}
		return seq, nil
	}
	return nil, fmt.Errorf("unsupported normalizer type %q", typ)
}

type formNorm struct{ f norm.Form }

func (n formNorm) normalize(s []byte) []byte { return n.f.Bytes(s) }

// lowercaseNorm uses Go's simple case mapping; Rust's to_lowercase differs
// only for a few special cases (final sigma, U+0130).
type lowercaseNorm struct{}

func (lowercaseNorm) normalize(s []byte) []byte { return bytes.ToLower(s) }

type stripAccentsNorm struct{}

func (stripAccentsNorm) normalize(s []byte) []byte {
	return bytes.Map(func(r rune) rune {
		if unicode.Is(unicode.Mn, r) {
			return -1
		}
		return r
	}, s)
}

type stripNorm struct{ left, right bool }

func (n stripNorm) normalize(s []byte) []byte {
	if n.left {
		s = bytes.TrimLeftFunc(s, unicode.IsSpace)
	}
	if n.right {
		s = bytes.TrimRightFunc(s, unicode.IsSpace)
	}
	return s
}

type prependNorm struct{ prefix string }

func (n prependNorm) normalize(s []byte) []byte {
	if len(s) == 0 {
		return s
	}
	out := make([]byte, 0, len(n.prefix)+len(s))
	return append(append(out, n.prefix...), s...)
}

type replaceNorm struct{ r *replacer }

func (n replaceNorm) normalize(s []byte) []byte { return n.r.replace(s) }

type seqNorm []normalizer

func (q seqNorm) normalize(s []byte) []byte {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}

// replacer implements the Replace normalizer and decoder: non-overlapping
// leftmost matches replaced by a fixed string.
type replacer struct {
	lit     []byte // literal pattern (nil when re is set)
	re      *regexp.Regexp
	content []byte
}

func newReplacer(p pattern, content string) (*replacer, error) {
	switch {
	case p.String != nil:
		return &replacer{lit: []byte(*p.String), content: []byte(content)}, nil
	case p.Regex != nil:
		conv, err := onigToRE2(*p.Regex)
		if err != nil {
			return nil, fmt.Errorf("normalizer Replace: pattern %q: %w", *p.Regex, err)
		}
		re, err := regexp.Compile(conv)
		if err != nil {
			return nil, fmt.Errorf("normalizer Replace: pattern %q: %w", *p.Regex, err)
		}
		return &replacer{re: re, content: []byte(content)}, nil
	}
	return nil, fmt.Errorf("normalizer Replace: %s", p.describe())
}

func (r *replacer) replace(s []byte) []byte {
	if r.re != nil {
		return r.re.ReplaceAllLiteral(s, r.content)
	}
	if len(r.lit) == 0 || !bytes.Contains(s, r.lit) {
		return s
	}
	return bytes.ReplaceAll(s, r.lit, r.content)
}

func (r *replacer) replaceString(s string) string {
	return string(r.replace([]byte(s)))
}
