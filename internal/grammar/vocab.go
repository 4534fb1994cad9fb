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
// tokens sorted by their bytes (a trie, below). Special tokens and
// tokens without bytes are left out: they are never allowed inside a
// constrained value. Build one per model and share it; it is safe for
// concurrent use (its content splits, split.go, are built on first use).
type Vocab struct {
	size int // mask width: the model's vocabulary (logit row length)
	trie
	byID [][]byte // bytes by id, nil for tokens never allowed

	splitMu sync.Mutex
	splits  map[splitKey]*split
}

// trie is tokens sorted by their bytes, each with the length of the
// prefix it shares with the one before (a token trie flattened in
// depth-first order).
type trie struct {
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
	// pairs[pairStart[b]:pairStart[b+1]] count the tokens under each
	// two-byte prefix starting with b (a finer bound than firstCount).
	pairStart [257]int32
	pairs     []bytePair
	maxLen    int
}

type bytePair struct {
	second byte
	n      int32
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
	var ids []int32
	for id := range int32(n) {
		if src.IsSpecial(id) {
			continue
		}
		if b := src.TokenBytes(id); len(b) > 0 && bytes.IndexByte(b, specialLead) < 0 {
			v.byID[id] = slices.Clip(b)
			ids = append(ids, id)
		}
	}
	for _, id := range specials {
		if id >= 0 && int(id) < n && v.byID[id] == nil {
			v.byID[id] = []byte(SpecialLiteral(id))
			ids = append(ids, id)
		}
	}
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(v.byID[a], v.byID[b]) })
	v.trie.build(ids, v.byID)
	// Every JSON string has this content; its split would otherwise be
	// built by a first request's mask.
	v.splitFor(splitKey{set: plainASCII, utf8: true})
	return v
}

// build lays out ids, already in byte order.
func (t *trie) build(ids []int32, byID [][]byte) {
	t.ids = ids
	total := 0
	for _, id := range ids {
		total += len(byID[id])
	}
	t.off = make([]uint32, 0, len(ids)+1)
	t.data = make([]byte, 0, total)
	t.lcp = make([]uint16, len(ids))
	var prev []byte
	for i, id := range ids {
		b := byID[id]
		t.off = append(t.off, uint32(len(t.data)))
		t.data = append(t.data, b...)
		t.lcp[i] = uint16(min(commonPrefix(prev, b), 0xFFFF))
		t.maxLen = max(t.maxLen, len(b))
		t.firstCount[b[0]]++
		prev = b
	}
	t.finish()
}

// buildSub lays out the tokens idx (ascending) of p: their bytes read in
// p's order (not by id, scattered in memory), the shared prefixes taken
// from p's (in byte order, a token shares with an earlier one the least
// prefix shared by any two neighbours between).
func (t *trie) buildSub(p *trie, idx []int32) {
	t.ids = make([]int32, len(idx))
	t.off = make([]uint32, 0, len(idx)+1)
	t.lcp = make([]uint16, len(idx))
	total := 0
	for _, i := range idx {
		total += int(p.off[i+1] - p.off[i])
	}
	t.data = make([]byte, 0, total)
	prev, from := int32(-1), uint32(0) // bytes from p.data[from:] not copied yet
	for j, i := range idx {
		if i != prev+1 {
			// Copy the run of neighbours up to here at once.
			t.data = append(t.data, p.data[from:p.off[prev+1]]...)
			from = p.off[i]
		}
		t.ids[j] = p.ids[i]
		t.off = append(t.off, uint32(len(t.data))+p.off[i]-from)
		if prev >= 0 {
			l := p.lcp[i]
			for k := prev + 1; k < i; k++ {
				l = min(l, p.lcp[k])
			}
			t.lcp[j] = l
		}
		n := int(p.off[i+1] - p.off[i])
		t.maxLen = max(t.maxLen, n)
		t.firstCount[p.data[p.off[i]]]++
		prev = i
	}
	if prev >= 0 {
		t.data = append(t.data, p.data[from:p.off[prev+1]]...)
	}
	t.finish()
}

func (t *trie) finish() {
	t.off = append(t.off, uint32(len(t.data)))
	last := -1 // the last pair counted, as first<<8 | second
	for i := range t.ids {
		tok := t.data[t.off[i]:t.off[i+1]]
		if len(tok) < 2 {
			continue
		}
		if p := int(tok[0])<<8 | int(tok[1]); p != last {
			t.pairs = append(t.pairs, bytePair{second: tok[1]})
			t.pairStart[tok[0]+1] = int32(len(t.pairs))
			last = p
		}
		t.pairs[len(t.pairs)-1].n++
	}
	for b := 1; b <= 256; b++ {
		t.pairStart[b] = max(t.pairStart[b], t.pairStart[b-1])
	}
	t.buildSkips()
	t.parts = splitParts(len(t.ids), min(runtime.GOMAXPROCS(0), maxMaskWorkers), minPartTokens)
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

// buildSkips fills skip from the right: nextLE(d) is the first token
// after the current one whose shared prefix is at most d bytes. A token
// sets nextLE(d) for every d from its shared prefix up, so nextLE is a
// step function, kept as a stack of steps: each token reads and pops
// only the steps above its shared prefix (linear in the trie's nodes,
// not tokens times the longest token).
func (t *trie) buildSkips() {
	n := len(t.ids)
	t.skipOff = make([]uint32, n+1)
	for k := range n {
		t.skipOff[k+1] = t.skipOff[k] + (t.off[k+1] - t.off[k]) - uint32(t.lcp[k])
	}
	t.skip = make([]uint32, t.skipOff[n])
	type step struct {
		from int    // nextLE(d) = next for from <= d < the next step's from
		next uint32 //
	}
	steps := []step{{0, uint32(n)}}
	for k := n - 1; k >= 0; k-- {
		l, ln := int(t.lcp[k]), int(t.off[k+1]-t.off[k])
		j := len(steps) - 1
		for steps[j].from > l {
			j--
		}
		out := t.skip[t.skipOff[k]:t.skipOff[k+1]]
		for d, at := l, j; d < ln; d++ {
			for at+1 < len(steps) && steps[at+1].from <= d {
				at++
			}
			out[d-l] = steps[at].next
		}
		if steps = steps[:j+1]; steps[j].from == l {
			steps[j].next = uint32(k)
		} else {
			steps = append(steps, step{l, uint32(k)})
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

// walk ORs into out the tokens whose whole byte string the automaton
// can read from state s. Tokens come in byte order, so a token walks
// only the bytes after the prefix it shares with the last token walked,
// and a token dying at byte d skips the whole subtree of tokens under
// that prefix. Wide states are walked in parallel parts.
func (t *trie) walk(d *dfa, s int32, out []uint64) {
	parts := t.parts
	if len(parts) <= 2 || t.livePairs(d, s, 2*minPartTokens) < 2*minPartTokens {
		t.walkRange(d, s, out, 0, len(t.ids))
		return
	}
	// The parts walk independently, each into its own words, merged after.
	locals := make([][]uint64, len(parts)-1)
	var wg sync.WaitGroup
	for p := range locals {
		locals[p] = make([]uint64, len(out))
		wg.Go(func() { t.walkRange(d, s, locals[p], parts[p], parts[p+1]) })
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
func (t *trie) liveTokens(d *dfa, s int32) int {
	n := 0
	row := d.trans[int(s)*d.nclass : int(s+1)*d.nclass]
	for b := range 256 {
		if row[d.classOf[b]] >= 0 {
			n += t.firstCount[b]
		}
	}
	return n
}

// livePairs counts, up to limit, the tokens whose first two bytes s
// accepts (those of one byte counted when s accepts their first): most
// states after a delimiter accept many first bytes but few second ones.
func (t *trie) livePairs(d *dfa, s int32, limit int) int {
	n := 0
	row := d.trans[int(s)*d.nclass : int(s+1)*d.nclass]
	for b := range 256 {
		s1 := row[d.classOf[b]]
		if s1 < 0 {
			continue
		}
		row1 := d.trans[int(s1)*d.nclass : int(s1+1)*d.nclass]
		under := 0
		for _, p := range t.pairs[t.pairStart[b]:t.pairStart[b+1]] {
			under += int(p.n)
			if row1[d.classOf[p.second]] >= 0 {
				n += int(p.n)
			}
		}
		if n += t.firstCount[b] - under; n >= limit {
			return n
		}
	}
	return n
}

// walkRange is walk over the tokens lo..hi of the byte order.
func (t *trie) walkRange(d *dfa, s int32, out []uint64, lo, hi int) {
	var stackBuf [256]int32
	stack := stackBuf[:]
	if t.maxLen >= len(stack) {
		stack = make([]int32, t.maxLen+1)
	}
	stack[0] = s
	trans, nclass, classOf := d.trans, d.nclass, &d.classOf
	shared := 0 // prefix length shared with the last token walked
	for i := lo; i < hi; {
		shared = min(shared, int(t.lcp[i]))
		tok := t.data[t.off[i]:t.off[i+1]]
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
			id := t.ids[i]
			out[id>>6] |= 1 << (id & 63)
			shared = k
			i++
			continue
		}
		// Everything under tok[:k+1] is dead; the next token shares at
		// most k bytes with this one.
		shared = k
		if l := int(t.lcp[i]); k >= l {
			i = min(int(t.skip[int(t.skipOff[i])+k-l]), hi)
			continue
		}
		// Died inside the prefix shared with the token before, which only
		// a range's first token walks: scan to the end of the subtree.
		for i++; i < hi && int(t.lcp[i]) > k; i++ {
		}
	}
}
