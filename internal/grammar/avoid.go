package grammar

// avoid is f's language without the strings in which any of ms occurs:
// the product of f's states with the Aho-Corasick automaton of ms, the
// states where a marker is complete left out. Call markup is found by
// its text (a parser looks for "</parameter>" or <|call|>), so a value
// inside it must not spell that text. f must be freshly built: its exit
// has no edges yet, so its states are those reachable from its entry.
func (n *nfa) avoid(f frag, ms ...string) frag {
	ac := newAhoCorasick(ms)
	type pair struct {
		s int32
		k int
	}
	ids := map[pair]int32{}
	var queue []pair
	get := func(p pair) int32 {
		if id, ok := ids[p]; ok {
			return id
		}
		id := n.state()
		ids[p] = id
		queue = append(queue, p)
		return id
	}
	in := get(pair{f.in, 0})
	out := n.state()
	for len(queue) > 0 && n.err == nil {
		p := queue[0]
		queue = queue[1:]
		from := ids[p]
		st := n.states[p.s] // a copy: n.states grows below
		for _, t := range st.eps {
			n.eps(from, get(pair{t, p.k}))
		}
		if p.s == f.out {
			n.eps(from, out)
		}
		if st.set < 0 {
			continue
		}
		// Split the byte set by the marker state each byte leads to.
		set := n.sets[st.set]
		var parts = map[int]*byteSet{}
		var order []int
		for b := range 256 {
			if !set.has(byte(b)) {
				continue
			}
			k := ac.next[p.k][b]
			if ac.dead[k] {
				continue
			}
			if parts[k] == nil {
				parts[k] = &byteSet{}
				order = append(order, k)
			}
			parts[k].add(byte(b), byte(b))
		}
		for _, k := range order {
			h := n.state()
			n.eps(from, h)
			n.edge(h, *parts[k], get(pair{st.to, k}))
		}
	}
	return frag{in, out}
}

// ahoCorasick is the byte automaton of a set of markers: next[k][b] the
// state after b, dead[k] when a marker has just been completed.
type ahoCorasick struct {
	next [][256]int
	dead []bool
}

func newAhoCorasick(ms []string) *ahoCorasick {
	ac := &ahoCorasick{next: [][256]int{{}}, dead: []bool{false}}
	child := []map[byte]int{{}}
	for _, m := range ms {
		k := 0
		for i := 0; i < len(m); i++ {
			nx, ok := child[k][m[i]]
			if !ok {
				nx = len(ac.next)
				ac.next = append(ac.next, [256]int{})
				ac.dead = append(ac.dead, false)
				child = append(child, map[byte]int{})
				child[k][m[i]] = nx
			}
			k = nx
		}
		if m != "" {
			ac.dead[k] = true
		}
	}
	// Breadth-first: a node's failure state is complete before its
	// children need it.
	fail := make([]int, len(ac.next))
	queue := []int{0}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		if ac.dead[fail[k]] {
			ac.dead[k] = true
		}
		for b := range 256 {
			if nx, ok := child[k][byte(b)]; ok {
				if k != 0 {
					fail[nx] = ac.next[fail[k]][b]
				}
				ac.next[k][b] = nx
				queue = append(queue, nx)
			} else if k != 0 {
				ac.next[k][b] = ac.next[fail[k]][b]
			}
		}
	}
	return ac
}
