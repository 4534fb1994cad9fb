package grammar

import (
	"errors"
	"fmt"
)

// byteSet is a set of bytes, one bit each.
type byteSet [4]uint64

func (s *byteSet) add(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s[c>>6] |= 1 << (c & 63)
	}
}

func (s *byteSet) has(c byte) bool { return s[c>>6]&(1<<(c&63)) != 0 }

// rangeSet is the set of bytes lo..hi.
func rangeSet(lo, hi byte) byteSet {
	var s byteSet
	s.add(lo, hi)
	return s
}

// nstate is one NFA state: epsilon edges and at most one byte-class edge
// (Thompson's construction), which keeps the builder and the subset
// construction simple.
type nstate struct {
	eps []int32
	set int32 // index into nfa.sets, -1 for none
	to  int32
}

// nfa is built by the schema compiler fragment by fragment.
type nfa struct {
	states []nstate
	sets   []byteSet
	setIdx map[byteSet]int32
	limit  int
	err    error
	// gemmaQuote, when set, switches values to Gemma 4's notation (bare
	// keys, no spaces, strings between this delimiter, unescaped): the
	// delimiter as the grammar writes it.
	gemmaQuote string
}

// frag is a piece of automaton with one entry and one exit.
type frag struct{ in, out int32 }

// errTooLarge is returned when a schema needs more automaton states than
// Options allow.
var errTooLarge = errors.New("the schema needs too large an automaton")

func newNFA(limit int) *nfa {
	return &nfa{setIdx: map[byteSet]int32{}, limit: limit}
}

func (n *nfa) state() int32 {
	if len(n.states) >= n.limit {
		if n.err == nil {
			n.err = fmt.Errorf("%w (over %d states)", errTooLarge, n.limit)
		}
		// Keep building into state 0 so callers need no checks; the error
		// is reported at the end.
		return 0
	}
	n.states = append(n.states, nstate{set: -1, to: -1})
	return int32(len(n.states) - 1)
}

func (n *nfa) eps(from, to int32) {
	n.states[from].eps = append(n.states[from].eps, to)
}

// edge adds from --s--> to; from must not have a byte edge yet.
func (n *nfa) edge(from int32, s byteSet, to int32) {
	i, ok := n.setIdx[s]
	if !ok {
		i = int32(len(n.sets))
		n.sets = append(n.sets, s)
		n.setIdx[s] = i
	}
	n.states[from].set, n.states[from].to = i, to
}

// class matches one byte of s.
func (n *nfa) class(s byteSet) frag {
	a, b := n.state(), n.state()
	n.edge(a, s, b)
	return frag{a, b}
}

// lit matches the bytes of s.
func (n *nfa) lit(s string) frag {
	first := n.state()
	cur := first
	for i := 0; i < len(s); i++ {
		next := n.state()
		n.edge(cur, rangeSet(s[i], s[i]), next)
		cur = next
	}
	return frag{first, cur}
}

// empty matches the empty string.
func (n *nfa) empty() frag {
	a := n.state()
	return frag{a, a}
}

// none matches nothing: its exit is unreachable.
func (n *nfa) none() frag { return frag{n.state(), n.state()} }

func (n *nfa) seq(fs ...frag) frag {
	if len(fs) == 0 {
		return n.empty()
	}
	for i := 1; i < len(fs); i++ {
		n.eps(fs[i-1].out, fs[i].in)
	}
	return frag{fs[0].in, fs[len(fs)-1].out}
}

func (n *nfa) alt(fs ...frag) frag {
	a, b := n.state(), n.state()
	for _, f := range fs {
		n.eps(a, f.in)
		n.eps(f.out, b)
	}
	return frag{a, b}
}

func (n *nfa) opt(f frag) frag {
	a, b := n.state(), n.state()
	n.eps(a, f.in)
	n.eps(a, b)
	n.eps(f.out, b)
	return frag{a, b}
}

// star is f repeated zero or more times (one copy of f, looped).
func (n *nfa) star(f frag) frag {
	a := n.state()
	n.eps(a, f.in)
	n.eps(f.out, a)
	return frag{a, a}
}

// gen builds a fresh copy of a sub-automaton each time it is called, so
// that it can be repeated.
type gen func(n *nfa) frag

// repeat is between lo and hi copies of g (hi < 0: unbounded). Optional
// copies nest, x{1,3} = x(x(x)?)?, so each exit is one skip away.
func (n *nfa) repeat(g gen, lo, hi int) frag {
	parts := make([]frag, 0, lo+1)
	for range lo {
		parts = append(parts, g(n))
		if n.err != nil {
			return n.none()
		}
	}
	switch {
	case hi < 0:
		parts = append(parts, n.star(g(n)))
	case hi > lo:
		end := n.state()
		start := n.state()
		cur := start
		for range hi - lo {
			f := g(n)
			if n.err != nil {
				return n.none()
			}
			n.eps(cur, f.in)
			n.eps(cur, end)
			cur = f.out
		}
		n.eps(cur, end)
		parts = append(parts, frag{start, end})
	}
	return n.seq(parts...)
}
