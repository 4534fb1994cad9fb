package grammar

import (
	"bytes"
	"runtime"
	"slices"
	"sync"
)

// TokenSource is what the matcher needs of a tokenizer
// (*tokenizer.Tokenizer satisfies it).
type TokenSource interface {
	VocabSize() int
	// TokenBytes is the bytes the token adds to the text mid-stream.
	TokenBytes(id int32) []byte
	IsSpecial(id int32) bool
}

// Vocab is a model's vocabulary laid out for mask computation: the
// tokens sorted by their bytes, each with the length of the prefix it
// shares with the one before (a token trie flattened in depth-first
// order). Special tokens and tokens without bytes are left out: they are
// never allowed inside a constrained value. Immutable; build one per
// model and share it.
type Vocab struct {
	size int      // mask width: the model's vocabulary (logit row length)
	ids  []int32  // token ids in byte order
	off  []uint32 // ids[i]'s bytes are data[off[i]:off[i+1]]
	data []byte
	lcp  []uint16 // common prefix length with the token before
	// skip[skipOff[i]+d-lcp[i]] is where the trie node of ids[i]'s first
	// d+1 bytes ends: the first later token not under it. A token that
	// dies at byte d skips every token under that node.
	skipOff []uint32
	skip    []uint32
	parts   []int // bounds of the ranges walked in parallel
	// firstCount[b] is the number of tokens starting with byte b.
	firstCount [256]int
	maxLen     int
	byID       [][]byte // bytes by id, nil for tokens never allowed
}

// NewVocab reads src's tokens; size is the model's vocabulary (logits
// per row), which may exceed the tokenizer's: ids past it are never
// allowed. specials are special tokens a grammar may write as themselves
// (call markup such as Mistral's [TOOL_CALLS]): each is laid out as its
// SpecialLiteral, so it is allowed exactly where a grammar puts that
// literal. Other tokens holding the byte 0xFF (never in UTF-8 text) are
// left out, so that no plain token can begin a special's literal.
func NewVocab(src TokenSource, size int, specials ...int32) *Vocab {
	v := &Vocab{size: size, byID: make([][]byte, size)}
	n := min(size, src.VocabSize())
	for id := range int32(n) {
		if src.IsSpecial(id) {
			continue
		}
		if b := src.TokenBytes(id); len(b) > 0 && bytes.IndexByte(b, specialLead) < 0 {
			v.byID[id] = slices.Clip(b)
			v.ids = append(v.ids, id)
		}
	}
	for _, id := range specials {
		if id >= 0 && int(id) < n && v.byID[id] == nil {
			v.byID[id] = []byte(SpecialLiteral(id))
			v.ids = append(v.ids, id)
		}
	}
	slices.SortStableFunc(v.ids, func(a, b int32) int { return bytes.Compare(v.byID[a], v.byID[b]) })
	v.off = make([]uint32, 0, len(v.ids)+1)
	v.lcp = make([]uint16, len(v.ids))
	var prev []byte
	for i, id := range v.ids {
		b := v.byID[id]
		v.off = append(v.off, uint32(len(v.data)))
		v.data = append(v.data, b...)
		v.lcp[i] = uint16(min(commonPrefix(prev, b), 0xFFFF))
		v.maxLen = max(v.maxLen, len(b))
		v.firstCount[b[0]]++
		prev = b
	}
	v.off = append(v.off, uint32(len(v.data)))
	v.buildSkips()
	v.parts = splitParts(len(v.ids), min(runtime.GOMAXPROCS(0), maxMaskWorkers), minPartTokens)
	return v
}

// specialLead starts a special token's literal: a byte no UTF-8 text
// holds, so no grammar of text ever allows it.
const specialLead = 0xFF

// SpecialLiteral is how a grammar writes special token id: 0xFF and the
// id in three bytes, one literal per token, none a prefix of another.
func SpecialLiteral(id int32) string {
	return string([]byte{specialLead, byte(id >> 16), byte(id >> 8), byte(id)})
}

// Parallel mask walks: at most maxMaskWorkers goroutines, each over at
// least minPartTokens tokens (below that a goroutine costs more than the
// walk it saves).
const (
	maxMaskWorkers = 8
	minPartTokens  = 16384
)

// splitParts cuts 0..n into up to workers ranges of equal size. Any cut
// is correct: a range starts its walk from scratch, and a skip never
// leaves its range.
func splitParts(n, workers, minPart int) []int {
	workers = max(min(workers, n/max(minPart, 1)), 1)
	parts := make([]int, 0, workers+1)
	for p := range workers {
		parts = append(parts, p*n/workers)
	}
	return append(parts, n)
}

// buildSkips fills skip from the right: nextLE[d] is the first token
// after the current one whose shared prefix is at most d bytes.
func (v *Vocab) buildSkips() {
	n := len(v.ids)
	nextLE := make([]uint32, v.maxLen+1)
	for d := range nextLE {
		nextLE[d] = uint32(n)
	}
	v.skipOff = make([]uint32, n+1)
	for k := range n {
		v.skipOff[k+1] = v.skipOff[k] + (v.off[k+1] - v.off[k]) - uint32(v.lcp[k])
	}
	v.skip = make([]uint32, v.skipOff[n])
	for k := n - 1; k >= 0; k-- {
		l, ln := int(v.lcp[k]), int(v.off[k+1]-v.off[k])
		copy(v.skip[v.skipOff[k]:v.skipOff[k+1]], nextLE[l:ln])
		for d := l; d <= v.maxLen; d++ {
			nextLE[d] = uint32(k)
		}
	}
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Size is the mask width in tokens.
func (v *Vocab) Size() int { return v.size }

// Words is the length of a mask in uint64 words.
func (v *Vocab) Words() int { return (v.size + 63) / 64 }

// mask computes the tokens whose whole byte string the automaton can
// read from state s. Tokens come in byte order, so a token walks only
// the bytes after the prefix it shares with the last token walked, and a
// token dying at byte d skips the whole subtree of tokens under that
// prefix. classes[i] (nil when the grammar has over 64 byte classes) is
// the set of byte classes of ids[i]: a token made only of the classes of
// s's content run (d.contentRun), and no longer than it, is accepted
// without a walk (inside a string, most of the vocabulary).
func (v *Vocab) mask(d *dfa, s int32, classes []uint64, out []uint64) {
	parts := v.parts
	if len(parts) <= 2 || v.liveTokens(d, s) < 2*minPartTokens {
		v.maskRange(d, s, classes, out, 0, len(v.ids))
		return
	}
	// The parts walk independently, each into its own words, merged after.
	locals := make([][]uint64, len(parts)-1)
	var wg sync.WaitGroup
	for p := range locals {
		locals[p] = make([]uint64, len(out))
		wg.Go(func() { v.maskRange(d, s, classes, locals[p], parts[p], parts[p+1]) })
	}
	wg.Wait()
	for _, l := range locals {
		for w, x := range l {
			out[w] |= x
		}
	}
}

// liveTokens counts the tokens whose first byte s accepts: an upper
// bound of the walk, to keep narrow states off the goroutines.
func (v *Vocab) liveTokens(d *dfa, s int32) int {
	n := 0
	for b := range 256 {
		if d.next(s, byte(b)) >= 0 {
			n += v.firstCount[b]
		}
	}
	return n
}

// maskRange is mask over the tokens lo..hi of the byte order.
func (v *Vocab) maskRange(d *dfa, s int32, classes []uint64, out []uint64, lo, hi int) {
	stack := make([]int32, v.maxLen+1)
	stack[0] = s
	trans, nclass, classOf := d.trans, d.nclass, &d.classOf
	run, runLen := uint64(0), 0
	if classes != nil {
		run, runLen = d.contentRun(s, v.maxLen)
	}
	shared := 0 // prefix length shared with the last token walked
	for i := lo; i < hi; {
		shared = min(shared, int(v.lcp[i]))
		id := v.ids[i]
		if run != 0 && classes[i]&^run == 0 && int(v.off[i+1]-v.off[i]) <= runLen {
			out[id>>6] |= 1 << (id & 63)
			i++
			continue
		}
		tok := v.data[v.off[i]:v.off[i+1]]
		k, st := shared, stack[shared]
		for k < len(tok) {
			st = trans[int(st)*nclass+int(classOf[tok[k]])]
			if st < 0 {
				break
			}
			k++
			stack[k] = st
		}
		if k == len(tok) {
			out[id>>6] |= 1 << (id & 63)
			shared = k
			i++
			continue
		}
		// Everything under tok[:k+1] is dead; the next token shares at
		// most k bytes with this one.
		shared = k
		if l := int(v.lcp[i]); k >= l {
			i = min(int(v.skip[int(v.skipOff[i])+k-l]), hi)
			continue
		}
		// Died inside the prefix shared with the token before, which only
		// a range's first token walks: scan to the end of the subtree.
		for i++; i < hi && int(v.lcp[i]) > k; i++ {
		}
	}
}

// contentRun finds the run of plain content from s: the classes c (as a
// set, run) that all lead from s to one state, and from there on to one
// next state each, for n steps (at most max; a state looping on itself
// runs to max). Any n bytes of those classes take s to a live state: a
// string's characters, bounded (a chain of states) or not (a loop). The
// run is seeded by the class of 'a', the commonest content byte.
func (d *dfa) contentRun(s int32, limit int) (run uint64, n int) {
	seed := int(d.classOf['a'])
	first := d.trans[int(s)*d.nclass+seed]
	if first < 0 {
		return 0, 0
	}
	for c := range d.nclass {
		if d.trans[int(s)*d.nclass+c] == first {
			run |= 1 << c
		}
	}
	for cur := s; n < limit; n++ {
		row := d.trans[int(cur)*d.nclass : int(cur+1)*d.nclass]
		next := row[seed]
		if next < 0 {
			break
		}
		for c := range d.nclass {
			if run&(1<<c) != 0 && row[c] != next {
				return run, n
			}
		}
		cur = next
	}
	return run, n
}

// tokenClasses is, per token in byte order, the set of d's byte classes
// it holds; nil when d has more than 64 classes.
func (v *Vocab) tokenClasses(d *dfa) []uint64 {
	if d.nclass > 64 {
		return nil
	}
	out := make([]uint64, len(v.ids))
	for i := range v.ids {
		var m uint64
		for _, c := range v.data[v.off[i]:v.off[i+1]] {
			m |= 1 << d.classOf[c]
		}
		out[i] = m
	}
	return out
}
