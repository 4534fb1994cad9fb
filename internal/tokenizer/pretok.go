package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"unicode"
	"unicode/utf8"
)

// emitFn receives one pre-token; first reports that it starts at offset 0
// of the original text (what Metaspace's prepend_scheme "first" checks).
// The slice is only valid during the call.
type emitFn func(p []byte, first bool)

// preTokenizer splits (and may rewrite) one non-empty piece of text.
type preTokenizer interface {
	split(st *encState, s []byte, first bool, emit emitFn)
}

// slotAlloc hands out per-call scratch buffer indexes to the stages that
// rewrite text, so nested stages never share a buffer.
type slotAlloc struct{ n int }

func (a *slotAlloc) next() int { a.n++; return a.n - 1 }

// matcher finds the non-overlapping matches of a pattern in order.
type matcher interface {
	find(s []byte, fn func(start, end int))
}

// Exact pattern strings from tokenizer.json files that get a hand-written
// scanner instead of Go's regexp (which cannot express the lookahead).
const (
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	gpt2Pattern   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

func newMatcher(p pattern) (matcher, error) {
	switch {
	case p.String != nil:
		return literalMatcher([]byte(*p.String)), nil
	case p.Regex != nil:
		switch *p.Regex {
		case llama3Pattern:
			return llama3Scanner{maxDigits: 3}, nil
		case qwen2Pattern:
			return llama3Scanner{maxDigits: 1}, nil
		case gpt2Pattern:
			return gpt2Scanner{}, nil
		}
		m, err := compileOnig(*p.Regex)
		if err != nil {
			return nil, fmt.Errorf("pre-tokenizer Split: pattern %q is not supported: %w", *p.Regex, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("pre-tokenizer Split: %s", p.describe())
}

type literalMatcher []byte

func (m literalMatcher) find(s []byte, fn func(start, end int)) {
	if len(m) == 0 {
		return
	}
	for i := 0; i <= len(s)-len(m); {
		k := bytes.Index(s[i:], m)
		if k < 0 {
			return
		}
		fn(i+k, i+k+len(m))
		i += k + len(m)
	}
}

type regexMatcher struct{ re *regexp.Regexp }

func (m regexMatcher) find(s []byte, fn func(start, end int)) {
	for _, loc := range m.re.FindAllIndex(s, -1) {
		fn(loc[0], loc[1])
	}
}

// runeMatcher matches every rune satisfying pred, one match per rune.
type runeMatcher func(rune) bool

func (m runeMatcher) find(s []byte, fn func(start, end int)) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		if m(r) {
			fn(i, i+n)
		}
		i += n
	}
}

type behavior int

const (
	behRemoved behavior = iota
	behIsolated
	behMergedWithPrevious
	behMergedWithNext
	behContiguous
)

func parseBehavior(s string) (behavior, error) {
	switch s {
	case "Removed":
		return behRemoved, nil
	case "Isolated":
		return behIsolated, nil
	case "MergedWithPrevious":
		return behMergedWithPrevious, nil
	case "MergedWithNext":
		return behMergedWithNext, nil
	case "Contiguous":
		return behContiguous, nil
	}
	return 0, fmt.Errorf("unknown split behavior %q", s)
}

type span struct {
	start, end int
	match      bool
}

// splitter is HF's NormalizedString::split: find matches, mark them
// (inverted if asked), then join or drop pieces according to behavior.
type splitter struct {
	m      matcher
	beh    behavior
	invert bool
	slot   int
}

func (sp *splitter) split(st *encState, s []byte, first bool, emit emitFn) {
	out := func(a, b int) {
		if b > a {
			emit(s[a:b], first && a == 0)
		}
	}
	if sp.beh == behIsolated {
		// Hot path: every piece stands alone, so stream them.
		prev := 0
		sp.m.find(s, func(a, b int) {
			out(prev, a)
			out(a, b)
			prev = b
		})
		out(prev, len(s))
		return
	}
	spans := st.spans[sp.slot][:0]
	prev := 0
	sp.m.find(s, func(a, b int) {
		if a > prev {
			spans = append(spans, span{prev, a, sp.invert})
		}
		spans = append(spans, span{a, b, !sp.invert})
		prev = b
	})
	if prev < len(s) {
		spans = append(spans, span{prev, len(s), sp.invert})
	}
	st.spans[sp.slot] = spans
	switch sp.beh {
	case behRemoved:
		for _, x := range spans {
			if !x.match {
				out(x.start, x.end)
			}
		}
	case behMergedWithPrevious:
		// A match joins the piece before it unless that was a match too.
		merged := spans[:0:0]
		prevMatch := false
		for _, x := range spans {
			if x.match && !prevMatch && len(merged) > 0 {
				merged[len(merged)-1].end = x.end
			} else {
				merged = append(merged, x)
			}
			prevMatch = x.match
		}
		for _, x := range merged {
			out(x.start, x.end)
		}
	case behMergedWithNext:
		// A match joins the piece after it unless that is a match too.
		var merged []span
		nextMatch := false
		for i := len(spans) - 1; i >= 0; i-- {
			x := spans[i]
			if x.match && !nextMatch && len(merged) > 0 {
				merged[len(merged)-1].start = x.start
			} else {
				merged = append(merged, x)
			}
			nextMatch = x.match
		}
		for i := len(merged) - 1; i >= 0; i-- {
			out(merged[i].start, merged[i].end)
		}
	case behContiguous:
		for i := 0; i < len(spans); {
			j := i + 1
			for j < len(spans) && spans[j].match == spans[i].match {
				j++
			}
			out(spans[i].start, spans[j-1].end)
			i = j
		}
	}
}

// byteLevelPre maps every byte to the GPT-2 alphabet, optionally after a
// leading space and the GPT-2 regex split.
type byteLevelPre struct {
	addPrefixSpace bool
	useRegex       bool
	slotPrefix     int
	slotOut        int
}

func (b *byteLevelPre) split(st *encState, s []byte, first bool, emit emitFn) {
	if b.addPrefixSpace && s[0] != ' ' {
		buf := append(append(st.bufs[b.slotPrefix][:0], ' '), s...)
		st.bufs[b.slotPrefix] = buf
		s = buf
	}
	mapEmit := func(p []byte, f bool) {
		out := appendByteLevel(st.bufs[b.slotOut][:0], p)
		st.bufs[b.slotOut] = out
		emit(out, f)
	}
	if !b.useRegex {
		mapEmit(s, first)
		return
	}
	gpt2Scanner{}.find(s, func(a, e int) { mapEmit(s[a:e], first && a == 0) })
}

const (
	prependAlways = iota
	prependFirst
	prependNever
)

func parsePrependScheme(scheme string, addPrefixSpace *bool) (int, error) {
	p := prependAlways
	switch scheme {
	case "", "always":
	case "first":
		p = prependFirst
	case "never":
		p = prependNever
	default:
		return 0, fmt.Errorf("unknown prepend_scheme %q", scheme)
	}
	if addPrefixSpace != nil && !*addPrefixSpace {
		p = prependNever
	}
	return p, nil
}

// metaspacePre replaces spaces with the replacement rune (▁), prepends one
// per prepend_scheme, and optionally splits before each replacement.
type metaspacePre struct {
	repl    []byte
	prepend int
	doSplit bool
	slot    int
}

func (m *metaspacePre) split(st *encState, s []byte, first bool, emit emitFn) {
	buf := st.bufs[m.slot][:0]
	// Spaces become the replacement first, so a leading space counts as one.
	if len(s) > 0 && s[0] != ' ' && !bytes.HasPrefix(s, m.repl) &&
		(m.prepend == prependAlways || (m.prepend == prependFirst && first)) {
		buf = append(buf, m.repl...)
	}
	for _, c := range s {
		if c == ' ' {
			buf = append(buf, m.repl...)
		} else {
			buf = append(buf, c)
		}
	}
	st.bufs[m.slot] = buf
	if !m.doSplit {
		emit(buf, first)
		return
	}
	// MergedWithNext on the replacement: each piece starts at one.
	start := 0
	for i := 1; i < len(buf); i++ {
		if bytes.HasPrefix(buf[i:], m.repl) {
			emit(buf[start:i], first && start == 0)
			start = i
		}
	}
	emit(buf[start:], first && start == 0)
}

// whitespacePre is HF's Whitespace pre-tokenizer, `\w+|[^\w\s]+`.
type whitespacePre struct{}

func (whitespacePre) split(_ *encState, s []byte, first bool, emit emitFn) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		if unicode.IsSpace(r) {
			i += n
			continue
		}
		word := isWordRune(r)
		j := i + n
		for j < len(s) {
			r2, n2 := utf8.DecodeRune(s[j:])
			if unicode.IsSpace(r2) || isWordRune(r2) != word {
				break
			}
			j += n2
		}
		emit(s[i:j], first && i == 0)
		i = j
	}
}

// whitespaceSplitPre splits on whitespace and drops it.
type whitespaceSplitPre struct{}

func (whitespaceSplitPre) split(_ *encState, s []byte, first bool, emit emitFn) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		if unicode.IsSpace(r) {
			i += n
			continue
		}
		j := i + n
		for j < len(s) {
			r2, n2 := utf8.DecodeRune(s[j:])
			if unicode.IsSpace(r2) {
				break
			}
			j += n2
		}
		emit(s[i:j], first && i == 0)
		i = j
	}
}

// seqPre runs pre-tokenizers in turn, each on the pieces of the previous.
type seqPre []preTokenizer

func (q seqPre) split(st *encState, s []byte, first bool, emit emitFn) {
	if len(q) == 0 {
		emit(s, first)
		return
	}
	next := emit
	for i := len(q) - 1; i >= 1; i-- {
		p, nx := q[i], next
		next = func(s []byte, f bool) { p.split(st, s, f, nx) }
	}
	q[0].split(st, s, first, next)
}

// isWordRune is the Unicode \w of Rust's regex crate: Alphabetic, marks,
// decimal digits, connector punctuation and joiners.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r == '_' || (r >= '0' && r <= '9') || (r|0x20 >= 'a' && r|0x20 <= 'z')
	}
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) ||
		r == 0x200C || r == 0x200D
}

func parsePreTokenizer(raw []byte, slots *slotAlloc) (preTokenizer, error) {
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		var c struct {
			Items []json.RawMessage `json:"pretokenizers"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		var q seqPre
		for _, r := range c.Items {
			p, err := parsePreTokenizer(r, slots)
			if err != nil {
				return nil, err
			}
			q = append(q, p)
		}
		return q, nil
	case "Split":
		var c struct {
			Pattern  pattern `json:"pattern"`
			Behavior string  `json:"behavior"`
			Invert   bool    `json:"invert"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		m, err := newMatcher(c.Pattern)
		if err != nil {
			return nil, err
		}
		beh, err := parseBehavior(c.Behavior)
		if err != nil {
			return nil, err
		}
		if c.Invert && beh == behIsolated {
			// Isolated keeps every piece, so inversion changes nothing.
			c.Invert = false
		}
		return &splitter{m: m, beh: beh, invert: c.Invert, slot: slots.next()}, nil
	case "ByteLevel":
		c := struct {
			AddPrefixSpace bool `json:"add_prefix_space"`
			UseRegex       bool `json:"use_regex"`
		}{true, true}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		return &byteLevelPre{addPrefixSpace: c.AddPrefixSpace, useRegex: c.UseRegex,
			slotPrefix: slots.next(), slotOut: slots.next()}, nil
	case "Metaspace":
		c := struct {
			Replacement    string `json:"replacement"`
			PrependScheme  string `json:"prepend_scheme"`
			AddPrefixSpace *bool  `json:"add_prefix_space"`
			Split          *bool  `json:"split"`
		}{Replacement: "▁"}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		if utf8.RuneCountInString(c.Replacement) != 1 {
			return nil, fmt.Errorf("pre-tokenizer Metaspace: replacement %q is not one character", c.Replacement)
		}
		p, err := parsePrependScheme(c.PrependScheme, c.AddPrefixSpace)
		if err != nil {
			return nil, err
		}
		split := c.Split == nil || *c.Split
		return &metaspacePre{repl: []byte(c.Replacement), prepend: p, doSplit: split, slot: slots.next()}, nil
	case "Digits":
		var c struct {
			Individual bool `json:"individual_digits"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		beh := behContiguous
		if c.Individual {
			beh = behIsolated
		}
		// Digits splits on char::is_numeric (Unicode N), digit runs kept
		// together unless individual_digits.
		return &splitter{m: runeMatcher(unicode.IsNumber), beh: beh, slot: slots.next()}, nil
	case "Whitespace":
		return whitespacePre{}, nil
	case "WhitespaceSplit":
		return whitespaceSplitPre{}, nil
	}
	return nil, fmt.Errorf("unsupported pre_tokenizer type %q", typ)
}
