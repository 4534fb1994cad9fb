package grammar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// dfa is the determinized, trimmed and minimized automaton. Every state
// it keeps can still reach an accepting state, so any prefix that stays
// alive can be completed: the matcher never lets a sequence walk into a
// dead end.
type dfa struct {
	classOf [256]uint8 // byte -> equivalence class
	nclass  int
	trans   []int32 // state*nclass + class -> next state, -1 dead
	accept  []bool
	start   int32
}

func (d *dfa) next(s int32, c byte) int32 { return d.trans[int(s)*d.nclass+int(d.classOf[c])] }

// numStates is the number of live states.
func (d *dfa) numStates() int { return len(d.accept) }

// final reports whether s accepts and has no way to continue.
func (d *dfa) final(s int32) bool {
	if !d.accept[s] {
		return false
	}
	row := d.trans[int(s)*d.nclass : int(s+1)*d.nclass]
	return !slices.ContainsFunc(row, func(t int32) bool { return t >= 0 })
}

var errEmpty = errors.New("the schema admits no value that can be generated")

// determinize runs the subset construction from in to out and trims and
// minimizes the result. maxStates bounds the DFA.
func determinize(n *nfa, f frag, maxStates int) (*dfa, error) {
	d, err := subsetDFA(n, f, maxStates)
	if err != nil {
		return nil, err
	}
	d.minimize()
	return d, nil
}

// subsetDFA is the subset construction, trimmed.
func subsetDFA(n *nfa, f frag, maxStates int) (*dfa, error) {
	if n.err != nil {
		return nil, n.err
	}
	d := &dfa{}
	classes := byteClasses(n.sets, &d.classOf)
	d.nclass = classes
	// setClasses[i] lists the classes inside set i.
	setClasses := make([][]uint8, len(n.sets))
	for i, s := range n.sets {
		seen := make([]bool, classes)
		for c := 0; c < 256; c++ {
			if k := d.classOf[c]; s.has(byte(c)) && !seen[k] {
				seen[k] = true
				setClasses[i] = append(setClasses[i], k)
			}
		}
	}
	sub := &subsets{n: n, final: f.out, mark: make([]uint32, len(n.states)), index: map[string]int32{}}
	sub.add(sub.closure([]int32{f.in}))
	buckets := make([][]int32, classes)
	rows := rowBuf{width: classes}
	for i := 0; i < len(sub.sets); i++ {
		if len(sub.sets) > maxStates {
			return nil, fmt.Errorf("%w (over %d DFA states)", errTooLarge, maxStates)
		}
		for c := range buckets {
			buckets[c] = buckets[c][:0]
		}
		for _, s := range sub.sets[i] {
			st := &n.states[s]
			if st.set < 0 {
				continue
			}
			for _, c := range setClasses[st.set] {
				buckets[c] = append(buckets[c], st.to)
			}
		}
		sub.sets[i] = nil // done with: its key stays in the index
		row := rows.next()
		for c, b := range buckets {
			row[c] = -1
			if len(b) > 0 {
				row[c] = sub.add(sub.closure(b))
			}
		}
	}
	d.trans = rows.concat()
	d.accept = sub.accept
	if err := d.trim(); err != nil {
		return nil, err
	}
	return d, nil
}

// rowBuf collects a DFA's transition rows in chunks (64 rows, doubling
// up to 4096), copied into one slice at the end: a growing slice of
// megabytes costs more in fresh pages than the construction itself.
type rowBuf struct {
	width  int
	chunks [][]int32
}

// next is a new row of width entries, to fill.
func (r *rowBuf) next() []int32 {
	last := len(r.chunks) - 1
	if last < 0 || len(r.chunks[last]) == cap(r.chunks[last]) {
		rows := 64
		if last >= 0 {
			rows = min(2*cap(r.chunks[last])/r.width, 4096)
		}
		r.chunks = append(r.chunks, make([]int32, 0, rows*r.width))
		last++
	}
	c := r.chunks[last]
	r.chunks[last] = c[:len(c)+r.width]
	return r.chunks[last][len(c):]
}

func (r *rowBuf) concat() []int32 { return slices.Concat(r.chunks...) }

// byteClasses partitions the bytes so that bytes in one class belong to
// the same sets; it returns the number of classes.
func byteClasses(sets []byteSet, classOf *[256]uint8) int {
	n := 1
	for _, s := range sets {
		remap := map[[2]int]uint8{}
		next := 0
		var out [256]uint8
		for c := 0; c < 256; c++ {
			k := [2]int{int(classOf[c]), 0}
			if s.has(byte(c)) {
				k[1] = 1
			}
			v, ok := remap[k]
			if !ok {
				v = uint8(next)
				remap[k] = v
				next++
			}
			out[c] = v
		}
		*classOf = out
		n = next
	}
	return n
}

// subsets interns the DFA states of the subset construction.
type subsets struct {
	n      *nfa
	final  int32
	mark   []uint32
	gen    uint32
	stack  []int32
	sets   [][]int32
	accept []bool
	index  map[string]int32
	key    []byte
	buf    []int32 // closure's result, copied by add when new
}

// closure is the sorted epsilon closure of seeds, valid until the next
// call.
func (s *subsets) closure(seeds []int32) []int32 {
	s.gen++
	out := s.buf[:0]
	s.stack = append(s.stack[:0], seeds...)
	for len(s.stack) > 0 {
		x := s.stack[len(s.stack)-1]
		s.stack = s.stack[:len(s.stack)-1]
		if s.mark[x] == s.gen {
			continue
		}
		s.mark[x] = s.gen
		st := &s.n.states[x]
		// Only states with a byte edge matter for moves; the exit state
		// (final) matters for acceptance. Pure epsilon states are dropped, which
		// merges subsets that differ only in them.
		if st.set >= 0 || x == s.final {
			out = append(out, x)
		}
		s.stack = append(s.stack, st.eps...)
	}
	slices.Sort(out)
	s.buf = out
	return out
}

func (s *subsets) add(set []int32) int32 {
	s.key = s.key[:0]
	for _, x := range set {
		s.key = binary.LittleEndian.AppendUint32(s.key, uint32(x))
	}
	if i, ok := s.index[string(s.key)]; ok {
		return i
	}
	i := int32(len(s.sets))
	s.index[string(s.key)] = i
	set = slices.Clone(set)
	s.sets = append(s.sets, set)
	_, acc := slices.BinarySearch(set, s.final)
	s.accept = append(s.accept, acc)
	return i
}

// trim drops the states that cannot reach an accepting state and
// renumbers the rest.
func (d *dfa) trim() error {
	n := len(d.accept)
	// rev[revOff[t]:revOff[t+1]] are the states with an edge into t.
	revOff := make([]int32, n+1)
	for _, t := range d.trans {
		if t >= 0 {
			revOff[t+1]++
		}
	}
	for t := range n {
		revOff[t+1] += revOff[t]
	}
	rev := make([]int32, revOff[n])
	fill := slices.Clone(revOff[:n])
	for i, t := range d.trans {
		if t >= 0 {
			rev[fill[t]] = int32(i / d.nclass)
			fill[t]++
		}
	}
	live := make([]bool, n)
	var q []int32
	for s, a := range d.accept {
		if a {
			live[s] = true
			q = append(q, int32(s))
		}
	}
	for len(q) > 0 {
		t := q[len(q)-1]
		q = q[:len(q)-1]
		for _, s := range rev[revOff[t]:revOff[t+1]] {
			if !live[s] {
				live[s] = true
				q = append(q, s)
			}
		}
	}
	if !live[d.start] {
		return errEmpty
	}
	ids := make([]int32, n)
	k := int32(0)
	for s := range n {
		ids[s] = -1
		if live[s] {
			ids[s] = k
			k++
		}
	}
	if int(k) < n {
		d.relabel(ids, int(k))
	}
	return nil
}

// relabel maps state s to ids[s] (-1 drops it); states mapped to the same
// id must be equivalent.
func (d *dfa) relabel(ids []int32, k int) {
	trans := make([]int32, k*d.nclass)
	accept := make([]bool, k)
	for s, id := range ids {
		if id < 0 {
			continue
		}
		accept[id] = d.accept[s]
		for c := 0; c < d.nclass; c++ {
			t := d.trans[s*d.nclass+c]
			if t >= 0 {
				t = ids[t]
			}
			trans[int(id)*d.nclass+c] = t
		}
	}
	d.trans, d.accept, d.start = trans, accept, ids[d.start]
}
