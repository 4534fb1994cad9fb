package tokenizer

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// StreamDecoder turns generated ids into text incrementally. Each Add
// returns exactly the text that no later id can change, so the
// concatenation of everything Add and Flush return equals Decode of the
// whole sequence.
//
// Rather than re-decoding a sliding window of ids and guessing from a
// trailing U+FFFD (the text-generation-inference / vLLM approach), every
// decoder step has an incremental form that holds back only what is still
// undecided: an incomplete UTF-8 sequence in the byte-level stream, an
// open run of <0xNN> byte-fallback tokens (HF turns the whole run into
// U+FFFD if any byte of it is invalid, so it is final only once closed),
// leading characters a Strip decoder may still remove, or the prefix of a
// Replace pattern. The window approach gets those cases wrong, e.g. a
// valid character followed by a stray byte token inside one run.
type StreamDecoder struct {
	t    *Tokenizer
	skip bool
	head stage
	out  *strings.Builder
}

// NewStreamDecoder starts an empty stream. skipSpecial drops special
// tokens as Decode does.
func (t *Tokenizer) NewStreamDecoder(skipSpecial bool) *StreamDecoder {
	s := &StreamDecoder{t: t, skip: skipSpecial, out: &strings.Builder{}}
	s.reset()
	return s
}

func (s *StreamDecoder) reset() {
	var sink stage = &sinkStage{out: s.out}
	if s.t.decoder == nil {
		sink = &joinSpaceStage{out: s.out}
	} else {
		sink = s.t.decoder.stage(sink)
	}
	s.head = sink
}

// Add feeds one id and returns the text that became final (may be "").
func (s *StreamDecoder) Add(id int32) string {
	tok, ok := s.t.decodeToken(id, s.skip)
	if !ok {
		return ""
	}
	s.head.begin()
	s.head.data(tok)
	s.head.finish()
	return s.take()
}

// Flush ends the stream, returns the text still held back and resets the
// decoder so it can be reused for a new sequence.
func (s *StreamDecoder) Flush() string {
	s.head.end()
	r := s.take()
	s.reset()
	return r
}

func (s *StreamDecoder) take() string {
	r := s.out.String()
	s.out.Reset()
	return r
}

// stage is one decoder step in incremental form. Tokens arrive as
// begin, any number of data pieces, finish; end closes the stream.
type stage interface {
	begin()
	data(s string)
	finish()
	end()
}

type sinkStage struct{ out *strings.Builder }

func (*sinkStage) begin()                   {}
func (k *sinkStage) data(s string)          { k.out.WriteString(s) }
func (*sinkStage) finish()                  {}
func (*sinkStage) end()                     {}
func (byteLevelDec) stage(n stage) stage    { return &byteLevelStage{next: n} }
func (byteFallbackDec) stage(n stage) stage { return &byteFallbackStage{next: n} }
func (fuseDec) stage(n stage) stage         { return &fuseStage{next: n} }

// joinSpaceStage is the no-decoder case: tokens joined with spaces.
type joinSpaceStage struct {
	out *strings.Builder
	n   int
}

func (j *joinSpaceStage) begin() {
	if j.n > 0 {
		j.out.WriteByte(' ')
	}
	j.n++
}
func (j *joinSpaceStage) data(s string) { j.out.WriteString(s) }
func (*joinSpaceStage) finish()         {}
func (*joinSpaceStage) end()            {}

// byteLevelStage emits one logical token: the lossy UTF-8 decoding of all
// bytes so far, holding back only an incomplete trailing sequence.
type byteLevelStage struct {
	next    stage
	tok     []byte
	pending []byte
	started bool
	conv    []byte
	text    []byte
}

func (b *byteLevelStage) begin() {
	b.tok = b.tok[:0]
	if !b.started {
		b.started = true
		b.next.begin()
	}
}

func (b *byteLevelStage) data(s string) { b.tok = append(b.tok, s...) }

func (b *byteLevelStage) finish() {
	// The whole token is needed: one rune outside the alphabet makes the
	// token pass through as its own UTF-8.
	b.conv = byteLevelBytes(b.conv[:0], string(b.tok))
	b.pending = append(b.pending, b.conv...)
	var rest int
	b.text, rest = appendLossy(b.text[:0], b.pending, false)
	if len(b.text) > 0 {
		b.next.data(string(b.text))
	}
	n := copy(b.pending, b.pending[len(b.pending)-rest:])
	b.pending = b.pending[:n]
}

func (b *byteLevelStage) end() {
	if !b.started {
		b.next.begin()
	}
	if len(b.pending) > 0 {
		b.next.data("\uFFFD") // an incomplete sequence is one maximal subpart
		b.pending = b.pending[:0]
	}
	b.next.finish()
	b.next.end()
}

// byteFallbackStage holds a run of byte tokens until a normal token (or
// the end) closes it.
type byteFallbackStage struct {
	next stage
	tok  []byte
	run  []byte
}

func (b *byteFallbackStage) begin()        { b.tok = b.tok[:0] }
func (b *byteFallbackStage) data(s string) { b.tok = append(b.tok, s...) }

func (b *byteFallbackStage) finish() {
	if c, ok := parseByteToken(string(b.tok)); ok {
		b.run = append(b.run, c)
		return
	}
	b.flushRun()
	b.next.begin()
	b.next.data(string(b.tok))
	b.next.finish()
}

func (b *byteFallbackStage) flushRun() {
	for _, t := range flushByteRun(nil, b.run) {
		b.next.begin()
		b.next.data(t)
		b.next.finish()
	}
	b.run = b.run[:0]
}

func (b *byteFallbackStage) end() {
	b.flushRun()
	b.next.end()
}

// fuseStage merges everything into one token that ends with the stream.
type fuseStage struct {
	next    stage
	started bool
}

func (f *fuseStage) begin() {
	if !f.started {
		f.started = true
		f.next.begin()
	}
}
func (f *fuseStage) data(s string) { f.next.data(s) }
func (*fuseStage) finish()         {}
func (f *fuseStage) end() {
	if !f.started {
		f.next.begin()
	}
	f.next.finish()
	f.next.end()
}

func (d replaceDec) stage(n stage) stage { return &replaceStage{next: n, r: d.r} }

// replaceStage replaces a literal pattern as text streams through,
// keeping back a tail that could still grow into a match. A regex pattern
// waits for the whole token.
type replaceStage struct {
	next stage
	r    *replacer
	hold []byte
	out  []byte
}

func (s *replaceStage) begin() {
	s.hold = s.hold[:0]
	s.next.begin()
}

func (s *replaceStage) data(p string) {
	s.hold = append(s.hold, p...)
	if s.r.re != nil || len(s.r.lit) == 0 {
		return
	}
	lit, h := s.r.lit, s.hold
	s.out = s.out[:0]
	i := 0
	for i < len(h) {
		if bytes.HasPrefix(h[i:], lit) {
			s.out = append(s.out, s.r.content...)
			i += len(lit)
			continue
		}
		if len(h)-i < len(lit) && bytes.HasPrefix(lit, h[i:]) {
			break // may become a match with more text
		}
		s.out = append(s.out, h[i])
		i++
	}
	if len(s.out) > 0 {
		s.next.data(string(s.out))
	}
	s.hold = s.hold[:copy(s.hold, h[i:])]
}

func (s *replaceStage) finish() {
	if len(s.hold) > 0 {
		if s.r.re != nil {
			s.next.data(string(s.r.replace(s.hold)))
		} else {
			s.next.data(string(s.hold)) // too short to match
		}
		s.hold = s.hold[:0]
	}
	s.next.finish()
}

func (s *replaceStage) end() { s.next.end() }

func (d stripDec) stage(n stage) stage { return &stripStage{next: n, d: d} }

// stripStage drops leading content runes as they arrive and holds a
// trailing run of them until the token continues or ends.
type stripStage struct {
	next     stage
	d        stripDec
	stripped int
	leadDone bool
	trail    int
	out      []byte
}

func (s *stripStage) begin() {
	s.stripped, s.leadDone, s.trail = 0, false, 0
	s.next.begin()
}

func (s *stripStage) data(p string) {
	s.out = s.out[:0]
	for _, r := range p {
		if !s.leadDone {
			if r == s.d.content && s.stripped < s.d.start {
				s.stripped++
				continue
			}
			s.leadDone = true
		}
		if s.d.stop > 0 {
			if r == s.d.content {
				s.trail++
				continue
			}
			for ; s.trail > 0; s.trail-- {
				s.out = utf8.AppendRune(s.out, s.d.content)
			}
		}
		s.out = utf8.AppendRune(s.out, r)
	}
	if len(s.out) > 0 {
		s.next.data(string(s.out))
	}
}

func (s *stripStage) finish() {
	s.out = s.out[:0]
	for ; s.trail > s.d.stop; s.trail-- {
		s.out = utf8.AppendRune(s.out, s.d.content)
	}
	s.trail = 0
	if len(s.out) > 0 {
		s.next.data(string(s.out))
	}
	s.next.finish()
}

func (s *stripStage) end() { s.next.end() }

func (d metaspaceDec) stage(n stage) stage { return &metaspaceStage{next: n, d: d} }

type metaspaceStage struct {
	next stage
	d    metaspaceDec
	n    int
}

func (m *metaspaceStage) begin() {
	m.n++
	m.next.begin()
}

func (m *metaspaceStage) data(p string) {
	drop := m.n == 1 && m.d.dropFirst
	m.next.data(strings.Map(func(r rune) rune {
		if r != m.d.repl {
			return r
		}
		if drop {
			return -1
		}
		return ' '
	}, p))
}

func (m *metaspaceStage) finish() { m.next.finish() }
func (m *metaspaceStage) end()    { m.next.end() }

func (q seqDec) stage(n stage) stage {
	for i := len(q) - 1; i >= 0; i-- {
		n = q[i].stage(n)
	}
	return n
}
