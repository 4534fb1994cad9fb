package grammar

import (
	"bytes"
	"testing"
)

// toolCallsCopies is ToolCalls built the way it was before chains: the
// call's NFA copied per position, the whole determinized at once. The
// reference for the chained automaton.
func toolCallsCopies(t *testing.T, syntax string, tools []Tool, maxCalls int, o Options) *Grammar {
	t.Helper()
	ts := toolSyntaxes[syntax]
	if ts.single {
		maxCalls = 1
	}
	o.MaxNFAStates, o.MaxDFAStates = defaultNFAStates*maxCalls, defaultDFAStates*maxCalls
	mk := func(s string) string {
		if id, ok := o.Specials[s]; ok {
			return SpecialLiteral(id)
		}
		return s
	}
	one := func(n *nfa) frag {
		alts := make([]frag, len(tools))
		for i, tl := range tools {
			params := tl.Parameters
			if len(bytes.TrimSpace(params)) == 0 {
				params = []byte(`{"type":"object"}`)
			}
			root, err := parseJSON(params)
			if err != nil {
				t.Fatal(err)
			}
			c := &compiler{n: n, root: root, opts: o.withDefaults(), refs: map[string]int{}}
			alts[i] = ts.call(c, tl.Name, root, mk)
			if c.err != nil {
				t.Fatal(c.err)
			}
		}
		return n.alt(alts...)
	}
	var open, sep, end string
	if ts.list != nil {
		open, sep, end = ts.list(o, mk)
	}
	n := newNFA(o.MaxNFAStates)
	first := one(n)
	rest := n.repeat(func(n *nfa) frag { return n.seq(n.lit(sep), one(n)) }, 0, maxCalls-1)
	g, err := finish(n, []frag{n.seq(n.lit(open), first, rest, n.lit(end))}, o.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// equivalent reports whether a and b accept the same bytes, by a walk of
// their product (both are trimmed, so a pair alive on one side and dead
// on the other tells them apart).
func equivalent(a, b *dfa) bool {
	type pair struct{ x, y int32 }
	seen := map[pair]bool{{a.start, b.start}: true}
	q := []pair{{a.start, b.start}}
	for len(q) > 0 {
		p := q[0]
		q = q[1:]
		if a.accept[p.x] != b.accept[p.y] {
			return false
		}
		for c := range 256 {
			x, y := a.next(p.x, byte(c)), b.next(p.y, byte(c))
			if (x < 0) != (y < 0) {
				return false
			}
			if x >= 0 && !seen[pair{x, y}] {
				seen[pair{x, y}] = true
				q = append(q, pair{x, y})
			}
		}
	}
	return true
}

// TestToolCallsChainMatchesCopies: the chained call list is the same
// automaton (same language, as many states) as the NFA copies gave, in
// every syntax, markup as text or special tokens, with and without a
// thought first, for one and three calls.
func TestToolCallsChainMatchesCopies(t *testing.T) {
	for _, syntax := range ToolSyntaxes() {
		for _, special := range []bool{false, true} {
			for _, think := range []*Thinking{nil, {Open: "<think>", Close: "</think>"}, {Open: "<think>", Close: "</think>", Opened: true}} {
				if special && think != nil {
					continue // the thought and the markup do not meet
				}
				for _, calls := range []int{1, 3} {
					o := Options{Think: think}
					if special {
						o.Specials = withSpecials(syntax)
					}
					g, err := ToolCalls(syntax, forcedTools, calls, o)
					if err != nil {
						t.Fatalf("%s: %v", syntax, err)
					}
					want := toolCallsCopies(t, syntax, forcedTools, calls, o)
					if g.d.numStates() != want.d.numStates() || !equivalent(g.d, want.d) {
						t.Errorf("%s (specials %v, think %v, %d calls): %d states, the copies give %d, equivalent %v",
							syntax, special, think != nil, calls, g.d.numStates(), want.d.numStates(), equivalent(g.d, want.d))
					}
				}
			}
		}
	}
}
