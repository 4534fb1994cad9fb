package grammar

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// mooreMinimize is Moore's partition refinement, the reference for
// minimize: simple, one pass over every state and class per round.
func (d *dfa) mooreMinimize() {
	n := len(d.accept)
	block := make([]int32, n)
	for s, a := range d.accept {
		if a {
			block[s] = 1
		}
	}
	nblocks := 0
	for {
		index := map[string]int32{}
		next := make([]int32, n)
		var key []byte
		for s := range n {
			key = binary.LittleEndian.AppendUint32(key[:0], uint32(block[s]))
			for c := 0; c < d.nclass; c++ {
				t, b := d.trans[s*d.nclass+c], int32(-1)
				if t >= 0 {
					b = block[t]
				}
				key = binary.LittleEndian.AppendUint32(key, uint32(b))
			}
			id, ok := index[string(key)]
			if !ok {
				id = int32(len(index))
				index[string(key)] = id
			}
			next[s] = id
		}
		block = next
		if len(index) == nblocks {
			break
		}
		nblocks = len(index)
	}
	if nblocks != n {
		d.relabel(block, nblocks)
	}
}

func (d *dfa) clone() *dfa {
	c := *d
	c.trans, c.accept = slices.Clone(d.trans), slices.Clone(d.accept)
	return &c
}

// isomorphic reports whether a and b are the same automaton up to the
// numbering of states.
func isomorphic(a, b *dfa) bool {
	if a.numStates() != b.numStates() || a.nclass != b.nclass {
		return false
	}
	to := make([]int32, a.numStates())
	for i := range to {
		to[i] = -1
	}
	to[a.start] = b.start
	q := []int32{a.start}
	for len(q) > 0 {
		s := q[0]
		q = q[1:]
		if a.accept[s] != b.accept[to[s]] {
			return false
		}
		for c := range a.nclass {
			x, y := a.trans[int(s)*a.nclass+c], b.trans[int(to[s])*b.nclass+c]
			if (x < 0) != (y < 0) {
				return false
			}
			if x < 0 {
				continue
			}
			if to[x] < 0 {
				to[x] = y
				q = append(q, x)
			} else if to[x] != y {
				return false
			}
		}
	}
	return true
}

// randomDFA is a partial DFA over k classes, restricted to the states
// reachable from 0 and trimmed, as determinize leaves it: copies of the
// states of a random automaton of n states (each copy leading to random
// copies of the targets, so copies are equivalent), a few of them with
// one transition changed (so some are not).
func randomDFA(r *rand.Rand, n, k int) *dfa {
	copies := 1 + r.IntN(3)
	N := n * copies
	d := &dfa{nclass: k, trans: make([]int32, N*k), accept: make([]bool, N)}
	for s := range n {
		acc := r.IntN(4) == 0
		row := make([]int32, k)
		for c := range k {
			row[c] = -1
			if r.IntN(2) == 0 {
				row[c] = int32(r.IntN(n))
			}
		}
		for i := range copies {
			x := s*copies + i
			d.accept[x] = acc
			for c, t := range row {
				d.trans[x*k+c] = -1
				if t >= 0 {
					d.trans[x*k+c] = t*int32(copies) + int32(r.IntN(copies))
				}
			}
			if r.IntN(8) == 0 {
				d.trans[x*k+r.IntN(k)] = int32(r.IntN(N))
			}
		}
	}
	n = N
	reach := make([]bool, n)
	reach[0] = true
	q := []int32{0}
	for len(q) > 0 {
		s := q[0]
		q = q[1:]
		for _, t := range d.trans[int(s)*k : int(s+1)*k] {
			if t >= 0 && !reach[t] {
				reach[t] = true
				q = append(q, t)
			}
		}
	}
	ids := make([]int32, n)
	m := int32(0)
	for s := range n {
		ids[s] = -1
		if reach[s] {
			ids[s] = m
			m++
		}
	}
	d.relabel(ids, int(m))
	if d.trim() != nil {
		return nil
	}
	return d
}

// TestMinimizeMatchesMoore: on random partial DFAs, minimize gives the
// automaton Moore's refinement gives.
func TestMinimizeMatchesMoore(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tested, merged := 0, 0
	for range 3000 {
		d := randomDFA(r, 1+r.IntN(40), 1+r.IntN(4))
		if d == nil {
			continue
		}
		a, b := d.clone(), d.clone()
		a.minimize()
		b.mooreMinimize()
		if !isomorphic(a, b) {
			t.Fatalf("minimize: %d states, Moore: %d, from %d", a.numStates(), b.numStates(), d.numStates())
		}
		tested++
		if a.numStates() < d.numStates() {
			merged++
		}
	}
	t.Logf("%d random automata, %d with states merged", tested, merged)
	if tested < 1000 || merged < tested/4 {
		t.Fatalf("only %d random automata, %d with states merged", tested, merged)
	}
}

// TestGrammarsMinimal: the compiled grammars leave Moore's refinement
// nothing to merge.
func TestGrammarsMinimal(t *testing.T) {
	var gs []*Grammar
	for _, s := range []string{personSchema, `{"type":"object","additionalProperties":true}`} {
		g, err := CompileSchema([]byte(s), Options{})
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	for _, syntax := range ToolSyntaxes() {
		g, err := ToolCalls(syntax, forcedTools, 2, Options{})
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	for i, g := range gs {
		d := g.d.clone()
		d.mooreMinimize()
		if d.numStates() != g.d.numStates() {
			t.Errorf("grammar %d: %d states, Moore merges them into %d", i, g.d.numStates(), d.numStates())
		}
	}
}
