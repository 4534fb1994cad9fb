package grammar

import "slices"

// Minimization by partition refinement in O(m log n) for m transitions
// and n states: Valmari and Lehtinen's algorithm for partial DFAs
// ("Fast brief practical DFA minimization", IPL 2012), Hopcroft's
// "process the smaller half" over two refinable partitions, of the states
// (blocks) and of the transitions (cords: same label, heads in one
// block). Moore's refinement, used before, costs a pass over every state
// and class per round and needs as many rounds as the longest literal
// (hundreds for a tool call): 80% of a forced call's compile.

// refinable is a partition of 0..n-1 whose sets split on marks.
type refinable struct {
	elems []int32 // elements, grouped by set
	loc   []int32 // loc[e]: e's index in elems
	set   []int32 // set[e]: e's set
	first []int32 // set s is elems[first[s]:past[s]]
	past  []int32
	marks []int32 // marked elements of a set, at its front
	touch []int32 // sets with marks
	n     int32   // number of sets
}

func newRefinable(n int) *refinable {
	p := &refinable{
		elems: make([]int32, n), loc: make([]int32, n), set: make([]int32, n),
		first: make([]int32, n+1), past: make([]int32, n+1), marks: make([]int32, n+1),
	}
	for i := range n {
		p.elems[i], p.loc[i] = int32(i), int32(i)
	}
	if n > 0 {
		p.n, p.past[0] = 1, int32(n)
	}
	return p
}

// mark moves e to the marked front of its set.
func (p *refinable) mark(e int32) {
	s, i := p.set[e], p.loc[e]
	j := p.first[s] + p.marks[s]
	if i < j {
		return // marked already
	}
	p.elems[i], p.elems[j] = p.elems[j], e
	p.loc[p.elems[i]], p.loc[e] = i, j
	if p.marks[s] == 0 {
		p.touch = append(p.touch, s)
	}
	p.marks[s]++
}

// split cuts every set with marks into its marked and unmarked parts,
// the smaller part becoming a new set, and clears the marks.
func (p *refinable) split() {
	for _, s := range p.touch {
		j := p.first[s] + p.marks[s]
		p.marks[s] = 0
		if j == p.past[s] {
			continue // all marked: no split
		}
		z := p.n
		if j-p.first[s] <= p.past[s]-j {
			p.first[z], p.past[z], p.first[s] = p.first[s], j, j
		} else {
			p.first[z], p.past[z], p.past[s] = j, p.past[s], j
		}
		for i := p.first[z]; i < p.past[z]; i++ {
			p.set[p.elems[i]] = z
		}
		p.n++
	}
	p.touch = p.touch[:0]
}

// minimize merges equivalent states. d is trimmed: every state reachable
// and able to reach acceptance, so missing transitions are the only
// dead ends.
func (d *dfa) minimize() {
	n := d.numStates()
	// The transitions, as tail, label (class) and head.
	m := 0
	for _, t := range d.trans {
		if t >= 0 {
			m++
		}
	}
	tail, head, label := make([]int32, 0, m), make([]int32, 0, m), make([]uint8, 0, m)
	for i, t := range d.trans {
		if t >= 0 {
			tail, label, head = append(tail, int32(i/d.nclass)), append(label, uint8(i%d.nclass)), append(head, t)
		}
	}
	blocks := newRefinable(n)
	for s, a := range d.accept {
		if a {
			blocks.mark(int32(s))
		}
	}
	blocks.split()
	// Cords start as the transitions of each label (a counting sort).
	cords := newRefinable(m)
	if m > 0 {
		var at [257]int32
		for _, c := range label {
			at[int(c)+1]++
		}
		for c := 1; c <= 256; c++ {
			at[c] += at[c-1]
		}
		cords.n = 0
		for c := range 256 {
			if at[c] < at[c+1] {
				cords.first[cords.n], cords.past[cords.n] = at[c], at[c+1]
				cords.n++
			}
		}
		for t, c := range label {
			i := at[c]
			at[c]++
			cords.elems[i], cords.loc[t] = int32(t), i
		}
		for s := range cords.n {
			for i := cords.first[s]; i < cords.past[s]; i++ {
				cords.set[cords.elems[i]] = s
			}
		}
	}
	// in[inOff[q]:inOff[q+1]] are the transitions into q.
	inOff := make([]int32, n+1)
	for _, h := range head {
		inOff[h+1]++
	}
	for q := range n {
		inOff[q+1] += inOff[q]
	}
	in := make([]int32, m)
	fill := slices.Clone(inOff[:n])
	for t, h := range head {
		in[fill[h]] = int32(t)
		fill[h]++
	}
	// Block 0 is never a splitter: the cords of each label cover it.
	for b, c := int32(1), int32(0); c < cords.n; c++ {
		for i := cords.first[c]; i < cords.past[c]; i++ {
			blocks.mark(tail[cords.elems[i]])
		}
		blocks.split()
		for ; b < blocks.n; b++ {
			for i := blocks.first[b]; i < blocks.past[b]; i++ {
				q := blocks.elems[i]
				for _, t := range in[inOff[q]:inOff[q+1]] {
					cords.mark(t)
				}
			}
			cords.split()
		}
	}
	if int(blocks.n) == n {
		return
	}
	// Number the blocks by their first state: the subset construction's
	// breadth-first order, which keeps a chain of states (a literal, a
	// string's positions) adjacent in memory for the mask walks.
	id := make([]int32, blocks.n)
	for i := range id {
		id[i] = -1
	}
	ids := make([]int32, n)
	k := int32(0)
	for s, b := range blocks.set {
		if id[b] < 0 {
			id[b] = k
			k++
		}
		ids[s] = id[b]
	}
	d.relabel(ids, int(k))
}
