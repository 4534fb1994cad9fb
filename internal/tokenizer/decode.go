package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// decoder is one step of HF's decoder chain. decodeChain is the batch
// form (tokens in, tokens out, joined with "" at the very end); stage
// builds the incremental form used by StreamDecoder. The two are kept as
// separate implementations so that the stream tests cross-check them.
type decoder interface {
	decodeChain(toks []string) []string
	stage(next stage) stage
}

func parseDecoder(raw []byte) (decoder, error) {
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "ByteLevel":
		return byteLevelDec{}, nil
	case "ByteFallback":
		return byteFallbackDec{}, nil
	case "Fuse":
		return fuseDec{}, nil
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
		return replaceDec{rep}, nil
	case "Strip":
		var c struct {
			Content string `json:"content"`
			Start   int    `json:"start"`
			Stop    int    `json:"stop"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		r, n := utf8.DecodeRuneInString(c.Content)
		if n == 0 || n != len(c.Content) {
			return nil, fmt.Errorf("decoder Strip: content %q is not one character", c.Content)
		}
		return stripDec{content: r, start: c.Start, stop: c.Stop}, nil
	case "Metaspace":
		c := struct {
			Replacement    string `json:"replacement"`
			PrependScheme  string `json:"prepend_scheme"`
			AddPrefixSpace *bool  `json:"add_prefix_space"`
		}{Replacement: "▁"}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		r, n := utf8.DecodeRuneInString(c.Replacement)
		if n == 0 || n != len(c.Replacement) {
			return nil, fmt.Errorf("decoder Metaspace: replacement %q is not one character", c.Replacement)
		}
		p, err := parsePrependScheme(c.PrependScheme, c.AddPrefixSpace)
		if err != nil {
			return nil, err
		}
		return metaspaceDec{repl: r, dropFirst: p != prependNever}, nil
	case "Sequence":
		var c struct {
			Decoders []json.RawMessage `json:"decoders"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		var q seqDec
		for _, r := range c.Decoders {
			d, err := parseDecoder(r)
			if err != nil {
				return nil, err
			}
			q = append(q, d)
		}
		return q, nil
	}
	return nil, fmt.Errorf("unsupported decoder type %q", typ)
}

// byteLevelDec turns byte-level runes back into bytes across all tokens
// and decodes them as lossy UTF-8 into a single token.
type byteLevelDec struct{}

func (byteLevelDec) decodeChain(toks []string) []string {
	var b []byte
	for _, t := range toks {
		b = byteLevelBytes(b, t)
	}
	return []string{lossyString(b)}
}

// byteFallbackDec turns runs of <0xNN> tokens into the string they spell;
// a run that is not valid UTF-8 becomes one U+FFFD per byte.
type byteFallbackDec struct{}

// parseByteToken recognises "<0xNN>" like HF (which parses the two
// characters with u8::from_str_radix, so "<0x+A>" counts too).
func parseByteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	h, l := hexVal(t[3]), hexVal(t[4])
	switch {
	case t[3] == '+' && l >= 0:
		return byte(l), true
	case h >= 0 && l >= 0:
		return byte(h<<4 | l), true
	}
	return 0, false
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func flushByteRun(out []string, run []byte) []string {
	if len(run) == 0 {
		return out
	}
	if utf8.Valid(run) {
		return append(out, string(run))
	}
	for range run {
		out = append(out, "\uFFFD")
	}
	return out
}

func (byteFallbackDec) decodeChain(toks []string) []string {
	out := make([]string, 0, len(toks))
	var run []byte
	for _, t := range toks {
		if b, ok := parseByteToken(t); ok {
			run = append(run, b)
			continue
		}
		out = flushByteRun(out, run)
		run = run[:0]
		out = append(out, t)
	}
	return flushByteRun(out, run)
}

type fuseDec struct{}

func (fuseDec) decodeChain(toks []string) []string { return []string{strings.Join(toks, "")} }

type replaceDec struct{ r *replacer }

func (d replaceDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = d.r.replaceString(t)
	}
	return out
}

// stripDec removes up to start leading and stop trailing content runes
// from each token.
type stripDec struct {
	content     rune
	start, stop int
}

func (d stripDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		rs := []rune(t)
		lo := 0
		for lo < len(rs) && lo < d.start && rs[lo] == d.content {
			lo++
		}
		hi := len(rs)
		for k := 0; k < d.stop && hi > 0 && rs[hi-1] == d.content; k++ {
			hi--
		}
		if lo > hi {
			lo = hi
		}
		out[i] = string(rs[lo:hi])
	}
	return out
}

// metaspaceDec turns the replacement rune back into spaces; in the first
// token every replacement is dropped (HF's behaviour, which strips the
// prepended one).
type metaspaceDec struct {
	repl      rune
	dropFirst bool
}

func (d metaspaceDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		drop := i == 0 && d.dropFirst
		out[i] = strings.Map(func(r rune) rune {
			if r != d.repl {
				return r
			}
			if drop {
				return -1
			}
			return ' '
		}, t)
	}
	return out
}

type seqDec []decoder

func (q seqDec) decodeChain(toks []string) []string {
	for _, d := range q {
		toks = d.decodeChain(toks)
	}
	return toks
}
