package grammar

import (
	"slices"
	"sync"
)

// Content splits: inside a string most of the vocabulary is plain
// content, accepted whatever it says, so walking it per state is wasted
// work (and the first request of a schema pays it once per string
// position). A state's content run (contentRun) is the bytes, and where
// the grammar allows them all well-formed multi-byte UTF-8 characters,
// that all take it one step along a chain of states, for n steps. A
// token made only of those characters, at most n of them, is accepted
// without a walk. The tokens of each such character set are found once
// per vocabulary (xgrammar's context-independent tokens, per character
// set rather than per grammar): a split holds their bitmask by length
// and a trie of the other tokens, the only ones a state still walks.

// splitKey is a content character set: the single bytes, and whether
// well-formed multi-byte characters belong too (then set holds no byte
// of 0x80 or above, and a character counts as one step).
type splitKey struct {
	set  byteSet
	utf8 bool
}

// split is the vocabulary divided by one splitKey.
type split struct {
	once sync.Once
	all  []uint64   // mask of the content tokens
	le   [][]uint64 // le[n]: of those at most n characters long, n <= splitLevels
	long []lenToken // content tokens longer than splitLevels, longest first
	rest trie       // every other token
}

type lenToken struct {
	id  int32
	len int
}

const (
	// splitLevels bounds the lengths kept as masks (le): longer content
	// tokens are few and cleared one by one.
	splitLevels = 16
	// maxSplits bounds the splits a vocabulary keeps (about 0.5 MiB each
	// for a string's character set, a few MiB for a narrow pattern's).
	maxSplits = 16
	// A split is used for states with at least minSplitLive tokens
	// starting with a byte they accept and a run of at least minSplitRun
	// characters: narrower states walk fast enough, and would fill the
	// cache with splits that save nothing.
	minSplitLive = 4096
	minSplitRun  = 4
)

// charClasses are, per sequence of utf8Seqs and per byte of it, the
// distinct byte classes of a dfa that the byte set holds.
type charClasses [][][]uint8

func newCharClasses(d *dfa) charClasses {
	out := make(charClasses, len(utf8Seqs))
	for i, seq := range utf8Seqs {
		out[i] = make([][]uint8, len(seq))
		for j, set := range seq {
			var seen [256]bool
			for b := range 256 {
				if k := d.classOf[b]; set.has(byte(b)) && !seen[k] {
					seen[k] = true
					out[i][j] = append(out[i][j], k)
				}
			}
		}
	}
	return out
}

// charStep is the state every well-formed multi-byte character takes s
// to, or -1 when they do not all lead to one state.
func (d *dfa) charStep(s int32, cc charClasses) int32 {
	target := int32(-1)
	var bufA, bufB [8]int32
	for _, seq := range cc {
		cur, spare := append(bufA[:0], s), bufB[:0]
		for _, classes := range seq {
			next := spare[:0]
			for _, x := range cur {
				for _, k := range classes {
					t := d.trans[int(x)*d.nclass+int(k)]
					if t < 0 {
						return -1
					}
					if !slices.Contains(next, t) {
						if len(next) == cap(next) {
							return -1 // too many paths to follow: no run
						}
						next = append(next, t)
					}
				}
			}
			cur, spare = next, cur
		}
		for _, x := range cur {
			if target >= 0 && x != target {
				return -1
			}
			target = x
		}
	}
	return target
}

// runInfo is a state's content run: any n characters of key take the
// state along a chain of states (a chain that loops runs to the limit,
// the longest token). kills: the state after n steps accepts no byte
// that can begin a character of key, so longer content tokens all die.
type runInfo struct {
	key   splitKey
	n     int
	kills bool
}

// contentRun finds s's run. The run is seeded by the class of 'a', the
// commonest content byte: the classes leading where 'a' leads are its
// single bytes, and multi-byte characters join when they all lead there
// too.
func (d *dfa) contentRun(s int32, limit int, cc charClasses) (r runInfo, ok bool) {
	seed := int(d.classOf['a'])
	row := d.trans[int(s)*d.nclass : int(s+1)*d.nclass]
	first := row[seed]
	if first < 0 {
		return r, false
	}
	var classBuf [256]uint8
	classes := classBuf[:0]
	for c, t := range row {
		if t == first {
			classes = append(classes, uint8(c))
		}
	}
	for b := range 256 {
		if slices.Contains(classes, d.classOf[b]) {
			r.key.set[b>>6] |= 1 << (b & 63)
		}
	}
	high := r.key.set[2]|r.key.set[3] != 0
	r.key.utf8 = !high && d.charStep(s, cc) == first
	cur := s
	for r.n < limit {
		row = d.trans[int(cur)*d.nclass : int(cur+1)*d.nclass]
		next := row[seed]
		if next < 0 || (r.key.utf8 && d.charStep(cur, cc) != next) {
			break
		}
		same := true
		for _, c := range classes {
			if row[c] != next {
				same = false
				break
			}
		}
		if !same {
			break
		}
		r.n++
		if next == cur {
			// A loop: every further step is this one.
			r.n = limit
			break
		}
		cur = next
	}
	if r.n < limit {
		r.kills = d.killsContent(cur, r.key)
	}
	return r, true
}

// killsContent reports whether s accepts no byte that can begin a
// character of k.
func (d *dfa) killsContent(s int32, k splitKey) bool {
	for b := range 256 {
		starts := k.set.has(byte(b)) || (k.utf8 && b >= 0x80 && utf8Lead(byte(b)))
		if starts && d.next(s, byte(b)) >= 0 {
			return false
		}
	}
	return true
}

func utf8Lead(b byte) bool {
	for _, seq := range utf8Seqs {
		if seq[0].has(b) {
			return true
		}
	}
	return false
}

// chars is the length of b in characters of k, or -1 when b holds
// anything else. A multi-byte character cut off at the end of b counts
// as one: the state it leaves is on the way to the next step.
func (k *splitKey) chars(b []byte) int {
	n := 0
	for i := 0; i < len(b); n++ {
		c := b[i]
		if k.set.has(c) {
			i++
			continue
		}
		if !k.utf8 || c < 0x80 {
			return -1
		}
		l := seqLen(b[i:])
		if l == 0 {
			return -1
		}
		i += l
	}
	return n
}

// seqLen is the length of the UTF-8 sequence b starts with (what is left
// of b when it ends inside one), 0 when b starts with none.
func seqLen(b []byte) int {
	for _, seq := range utf8Seqs {
		if !seq[0].has(b[0]) {
			continue
		}
		for j := 1; j < len(seq); j++ {
			if j == len(b) {
				return j
			}
			if !seq[j].has(b[j]) {
				return 0
			}
		}
		return len(seq)
	}
	return 0
}

// splitFor returns the split of k, built on first use; nil when the
// vocabulary keeps maxSplits already.
func (v *Vocab) splitFor(k splitKey) *split {
	v.splitMu.Lock()
	sp := v.splits[k]
	if sp == nil {
		if len(v.splits) >= maxSplits {
			v.splitMu.Unlock()
			return nil
		}
		if v.splits == nil {
			v.splits = map[splitKey]*split{}
		}
		sp = &split{}
		v.splits[k] = sp
	}
	v.splitMu.Unlock()
	sp.once.Do(func() { sp.build(v, k) })
	return sp
}

func (sp *split) build(v *Vocab, k splitKey) {
	words := v.Words()
	sp.all = make([]uint64, words)
	sp.le = make([][]uint64, splitLevels+1)
	for n := range sp.le {
		sp.le[n] = make([]uint64, words)
	}
	var rest []int32 // indices in v's byte order
	for i, id := range v.ids {
		n := k.chars(v.data[v.off[i]:v.off[i+1]])
		if n < 0 {
			rest = append(rest, int32(i))
			continue
		}
		sp.all[id>>6] |= 1 << (id & 63)
		if n <= splitLevels {
			sp.le[n][id>>6] |= 1 << (id & 63)
		} else {
			sp.long = append(sp.long, lenToken{id, n})
		}
	}
	for n := 1; n <= splitLevels; n++ {
		for w, x := range sp.le[n-1] {
			sp.le[n][w] |= x
		}
	}
	slices.SortFunc(sp.long, func(a, b lenToken) int { return b.len - a.len })
	sp.rest.buildSub(&v.trie, rest)
}

// splitMask computes state s's mask (out zeroed) through a content split
// when s has a run worth one; false when it has not, and out is
// untouched.
func (v *Vocab) splitMask(d *dfa, s int32, cc charClasses, out []uint64) bool {
	if v.liveTokens(d, s) < minSplitLive {
		return false
	}
	r, ok := d.contentRun(s, v.maxLen, cc)
	if !ok || r.n < minSplitRun || (r.n <= splitLevels && !r.kills) {
		// Short runs: the walk is short too. A run up to splitLevels
		// that may continue would need its longer content tokens walked.
		return false
	}
	sp := v.splitFor(r.key)
	if sp == nil {
		return false
	}
	if r.n <= splitLevels {
		copy(out, sp.le[r.n])
	} else {
		copy(out, sp.all)
		for _, t := range sp.long {
			if t.len <= r.n {
				break
			}
			// Longer than the run: its first n characters reach the
			// run's end, from where it may die or go on.
			out[t.id>>6] &^= 1 << (t.id & 63)
			if !r.kills && walkBytes(d, s, v.byID[t.id]) >= 0 {
				out[t.id>>6] |= 1 << (t.id & 63)
			}
		}
	}
	sp.rest.walk(d, s, out)
	return true
}

// mask computes the tokens whose whole byte string the automaton can
// read from state s into out (zeroed): through a content split where s
// has one, else one walk of the whole vocabulary.
func (v *Vocab) mask(d *dfa, s int32, cc charClasses, out []uint64) {
	if !v.splitMask(d, s, cc, out) {
		v.trie.walk(d, s, out)
	}
}

func walkBytes(d *dfa, s int32, b []byte) int32 {
	for _, c := range b {
		if s = d.next(s, c); s < 0 {
			return -1
		}
	}
	return s
}
