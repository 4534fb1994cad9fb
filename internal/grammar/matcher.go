package grammar

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
)

// TokenTable is a grammar over one vocabulary: the token masks of its
// states, each computed on first use and kept. Safe for concurrent use;
// share one per (grammar, model) across requests.
type TokenTable struct {
	g     *Grammar
	v     *Vocab
	cc    charClasses // the multi-byte characters' byte classes in g (split.go)
	masks []atomic.Pointer[maskEntry]
	bytes atomic.Int64 // memory held by the computed masks
}

// maskEntry is one state's mask; done is closed once m is filled.
type maskEntry struct {
	done chan struct{}
	m    []uint64
}

// NewTokenTable binds g to v.
func NewTokenTable(g *Grammar, v *Vocab) *TokenTable {
	return &TokenTable{g: g, v: v, cc: newCharClasses(g.d), masks: make([]atomic.Pointer[maskEntry], g.d.numStates())}
}

// stateMask returns the mask of state s, computing it on first use; a
// caller arriving while another computes it waits for that one.
func (t *TokenTable) stateMask(s int32) []uint64 {
	if e := t.masks[s].Load(); e != nil {
		<-e.done
		return e.m
	}
	e := &maskEntry{done: make(chan struct{})}
	if !t.masks[s].CompareAndSwap(nil, e) {
		return t.stateMask(s)
	}
	e.m = make([]uint64, t.v.Words())
	t.v.mask(t.g.d, s, t.cc, e.m)
	t.bytes.Add(int64(8 * len(e.m)))
	close(e.done)
	return e.m
}

// MaskBytes is the memory the table's computed masks hold, for a cache
// to bound.
func (t *TokenTable) MaskBytes() int64 { return t.bytes.Load() }

// prefetch starts computing state s's mask in the background when it is
// not cached: called on Accept, it overlaps a first visit's vocabulary
// walk with the model's next forward step.
func (t *TokenTable) prefetch(s int32) {
	if t.masks[s].Load() == nil {
		go t.stateMask(s)
	}
}

// ErrNoToken means no token of the vocabulary can continue the value: the
// vocabulary cannot spell what the grammar requires here.
var ErrNoToken = errors.New("grammar: no token of the vocabulary can continue the constrained output")

// Matcher follows one sequence through the grammar. Not safe for
// concurrent use; make one per sequence.
type Matcher struct {
	t     *TokenTable
	end   []int32 // tokens that end generation (EOS, stop ids)
	state int32
	done  bool // an end token was accepted
}

// NewMatcher starts at the beginning of the value. end are the tokens
// that end generation (the model's EOS and stop ids): they are allowed
// only once the value is complete. A new table's first mask is started
// in the background, to overlap the prompt's prefill.
func (t *TokenTable) NewMatcher(end []int32) *Matcher {
	t.prefetch(t.g.d.start)
	return &Matcher{t: t, end: slices.Clone(end), state: t.g.d.start}
}

// Complete reports whether the text so far is a whole value.
func (m *Matcher) Complete() bool { return m.done || m.t.g.d.accept[m.state] }

// Mask writes the tokens allowed next into allowed (bit id%64 of word
// id/64; len(allowed) >= Vocab.Words()). It returns ErrNoToken when none
// is.
func (m *Matcher) Mask(allowed []uint64) error {
	w := m.t.v.Words()
	if len(allowed) < w {
		return fmt.Errorf("grammar: mask of %d words for a vocabulary of %d tokens", len(allowed), m.t.v.size)
	}
	allowed = allowed[:w]
	var any uint64
	if m.done {
		clear(allowed)
	} else {
		src := m.t.stateMask(m.state)
		copy(allowed, src)
		for _, x := range src {
			any |= x
		}
	}
	if m.Complete() {
		for _, id := range m.end {
			if id >= 0 && int(id) < m.t.v.size {
				allowed[id>>6] |= 1 << (id & 63)
				any = 1
			}
		}
	}
	if any == 0 {
		return ErrNoToken
	}
	return nil
}

// Accept advances past token id; an id the grammar does not allow here
// is an error and leaves the matcher unchanged.
func (m *Matcher) Accept(id int32) error {
	if slices.Contains(m.end, id) {
		if m.Complete() {
			m.done = true
			return nil
		}
		// A stop token may also be markup the grammar writes (gpt-oss's
		// <|call|>): then it is walked as such.
		if id < 0 || int(id) >= m.t.v.size || m.t.v.byID[id] == nil || m.t.g.walk(m.state, m.t.v.byID[id]) < 0 {
			return fmt.Errorf("grammar: end token %d before the value is complete", id)
		}
	}
	if m.done {
		return fmt.Errorf("grammar: token %d after the end", id)
	}
	if id < 0 || int(id) >= m.t.v.size || m.t.v.byID[id] == nil {
		return fmt.Errorf("grammar: token %d is never allowed in constrained output", id)
	}
	s := m.t.g.walk(m.state, m.t.v.byID[id])
	if s < 0 {
		return fmt.Errorf("grammar: token %d (%q) does not fit the grammar here", id, m.t.v.byID[id])
	}
	m.state = s
	m.t.prefetch(s)
	return nil
}

// Clone is an independent matcher at the same point (one per choice of a
// request that asks for several).
func (m *Matcher) Clone() *Matcher {
	c := *m
	return &c
}
