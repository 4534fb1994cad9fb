package grammar

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Chains of compiled automata. A forced call list is one call's
// automaton up to maxCalls times (no stack, so no counter): built as
// NFA copies, each copy went through the subset construction and
// minimization again, four times the work of one call for the same
// automaton copied four times. A chain compiles the call once and runs a
// subset construction over the parts' DFA states instead, whose subsets
// hold one or two states (a part's states are deterministic already).

// part is one automaton of a chain; after it (from an accepting state)
// any of next may follow, and -1 in next ends the chain.
type part struct {
	d    *dfa
	next []int
}

// pstate is a state of part p.
type pstate struct{ p, s int32 }

// chain compiles the parts, starting at parts[0], into one minimized DFA
// of at most maxStates states.
func chain(parts []part, maxStates int) (*dfa, error) {
	out := &dfa{}
	local := jointClasses(parts, out)
	c := &chainer{parts: parts, index: map[string]int32{}}
	c.add(c.closure([]pstate{{0, parts[0].d.start}}))
	var next []pstate
	rows := rowBuf{width: out.nclass}
	for i := 0; i < len(c.sets); i++ {
		if len(c.sets) > maxStates {
			return nil, fmt.Errorf("%w (over %d DFA states)", errTooLarge, maxStates)
		}
		set := c.sets[i]
		c.sets[i] = nil
		row := rows.next()
		for k := range row {
			next = next[:0]
			for _, x := range set {
				d := parts[x.p].d
				if t := d.trans[int(x.s)*d.nclass+int(local[x.p][k])]; t >= 0 {
					next = append(next, pstate{x.p, t})
				}
			}
			row[k] = -1
			if len(next) > 0 {
				row[k] = c.add(c.closure(next))
			}
		}
	}
	// No trim: the parts are trimmed and each leads to the end, so every
	// subset can still be completed.
	out.trans, out.accept = rows.concat(), c.accept
	out.minimize()
	return out, nil
}

// jointClasses sets out's byte classes to the coarsest partition that
// refines every part's, and returns per part the part's class of each
// joint class.
func jointClasses(parts []part, out *dfa) [][]uint8 {
	n := 1
	for _, p := range parts {
		remap := map[[2]uint8]uint8{}
		var next [256]uint8
		for b := range 256 {
			k := [2]uint8{out.classOf[b], p.d.classOf[b]}
			v, ok := remap[k]
			if !ok {
				v = uint8(len(remap))
				remap[k] = v
			}
			next[b] = v
		}
		out.classOf, n = next, len(remap)
	}
	out.nclass = n
	local := make([][]uint8, len(parts))
	for i, p := range parts {
		local[i] = make([]uint8, n)
		for b := range 256 {
			local[i][out.classOf[b]] = p.d.classOf[b]
		}
	}
	return local
}

// chainer interns the subsets of part states.
type chainer struct {
	parts  []part
	sets   [][]pstate
	accept []bool
	index  map[string]int32
	key    []byte
	acc    bool // the last closure accepts
}

// closure adds to seeds the starts of the parts that may follow an
// accepting state, sorted, and notes whether the chain may end there.
func (c *chainer) closure(seeds []pstate) []pstate {
	out := slices.Clone(seeds)
	c.acc = false
	for i := 0; i < len(out); i++ {
		x := out[i]
		if !c.parts[x.p].d.accept[x.s] {
			continue
		}
		for _, q := range c.parts[x.p].next {
			if q < 0 {
				c.acc = true
				continue
			}
			y := pstate{int32(q), c.parts[q].d.start}
			if !slices.Contains(out, y) {
				out = append(out, y)
			}
		}
	}
	slices.SortFunc(out, func(a, b pstate) int {
		if a.p != b.p {
			return int(a.p - b.p)
		}
		return int(a.s - b.s)
	})
	return slices.Compact(out)
}

func (c *chainer) add(set []pstate) int32 {
	c.key = c.key[:0]
	for _, x := range set {
		c.key = binary.LittleEndian.AppendUint32(c.key, uint32(x.p))
		c.key = binary.LittleEndian.AppendUint32(c.key, uint32(x.s))
	}
	if i, ok := c.index[string(c.key)]; ok {
		return i
	}
	i := int32(len(c.sets))
	c.index[string(c.key)] = i
	c.sets = append(c.sets, set)
	c.accept = append(c.accept, c.acc)
	return i
}

// litDFA is the automaton of the bytes of s alone.
func litDFA(s string) *dfa {
	n := newNFA(len(s) + 1)
	d, err := determinize(n, n.lit(s), len(s)+1)
	if err != nil {
		panic(fmt.Sprintf("grammar: the literal %q: %v", s, err)) // cannot fail: a literal has len(s)+1 states
	}
	return d
}
