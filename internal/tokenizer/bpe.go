package tokenizer

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// bpeModel is HF tokenizers' BPE model: the word is split into characters
// (with unk / byte-fallback handling), then the lowest-ranked adjacent merge
// is applied repeatedly. Merges are keyed by the id pair, so applying one is
// a map lookup.
type bpeModel struct {
	vocab        *strTable
	merges       *pairTable // (left<<32 | right) -> (rank<<32 | new id)
	unkID        int32      // -1: no unk token
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	prefix       string // continuing_subword_prefix
	suffix       string // end_of_word_suffix
	byteIDs      [256]int32
	// charIDs caches the id of every one-rune token below 0x800 (which covers
	// the byte-level alphabet) to skip a map lookup per character; -1 means
	// not in the vocabulary. Nil when prefix or suffix make ids positional.
	charIDs []int32

	cacheMu sync.RWMutex
	cache   map[string][]int32

	crossOnce sync.Once
	cross     map[uint64]struct{} // longword.go
}

const (
	maxCachedWord = 256 // bytes, as HF's BPE cache
	maxCacheSize  = 1 << 17
)

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func (m *bpeModel) init() {
	for b := range m.byteIDs {
		m.byteIDs[b] = -1
		if id, ok := m.vocab.getString(fmt.Sprintf("<0x%02X>", b)); ok {
			m.byteIDs[b] = id
		}
	}
	if m.prefix == "" && m.suffix == "" {
		m.charIDs = make([]int32, 0x800)
		var buf [4]byte
		for r := range m.charIDs {
			n := utf8.EncodeRune(buf[:], rune(r))
			id, ok := m.vocab.get(buf[:n])
			if !ok {
				id = -1
			}
			m.charIDs[r] = id
		}
	}
	m.cache = make(map[string][]int32, 1024)
}

// symbol is one node of the list the merges run over: a symbol absorbs
// the ones to its right, so the one before position p is the nearest
// live one left of p (found by a scan no longer than a token), and no
// prev link is kept. 8 bytes, with the 8-byte heap entries 16 bytes a
// character: a whole text merged as one word (tokenizers without a
// pre-tokenizer) costs that much.
type symbol struct {
	id   int32 // -1: merged away
	next int32
}

// mergeItem is a heap entry: rank<<32 | position, so that integer order
// is HF's Merge order (rank, then position). The merge's result is looked
// up again when popped: a stale entry is one whose pair no longer has
// its rank (ranks name merges one to one).
type mergeItem uint64

func newMergeItem(rank uint32, pos int32) mergeItem {
	return mergeItem(uint64(rank)<<32 | uint64(uint32(pos)))
}

func (x mergeItem) rank() uint32 { return uint32(x >> 32) }
func (x mergeItem) pos() int32   { return int32(uint32(x)) }

// bpeScratch holds per-call buffers so Encode allocates little.
type bpeScratch struct {
	syms []symbol
	heap []mergeItem
	word []byte
}

// tokenize appends the ids for one pre-token.
func (m *bpeModel) tokenize(sc *bpeScratch, w []byte, out []int32) []int32 {
	if len(w) == 0 {
		return out
	}
	if m.ignoreMerges {
		if id, ok := m.vocab.get(w); ok {
			return append(out, id)
		}
	}
	cacheable := len(w) < maxCachedWord
	if cacheable {
		m.cacheMu.RLock()
		ids, ok := m.cache[string(w)]
		m.cacheMu.RUnlock()
		if ok {
			return append(out, ids...)
		}
	}
	start := len(out)
	if len(w) > 2*longPiece && m.charIDs != nil {
		return m.mergeLong(sc, w, out)
	}
	out = m.mergeWord(sc, w, out)
	if cacheable {
		ids := append([]int32(nil), out[start:]...)
		m.cacheMu.Lock()
		if len(m.cache) < maxCacheSize {
			m.cache[string(w)] = ids
		}
		m.cacheMu.Unlock()
	}
	return out
}

// charID looks up the id of the character w[i:end] at position i.
func (m *bpeModel) charID(sc *bpeScratch, w []byte, i, end int, r rune) (int32, bool) {
	if m.charIDs != nil {
		if int(r) < len(m.charIDs) && r != utf8.RuneError {
			id := m.charIDs[r]
			return id, id >= 0
		}
		return m.vocab.get(w[i:end])
	}
	b := sc.word[:0]
	if i > 0 {
		b = append(b, m.prefix...)
	}
	b = append(b, w[i:end]...)
	if end == len(w) {
		b = append(b, m.suffix...)
	}
	sc.word = b
	return m.vocab.get(b)
}

func (m *bpeModel) mergeWord(sc *bpeScratch, w []byte, out []int32) []int32 {
	syms := sc.syms[:0]
	if n := utf8.RuneCount(w); cap(syms) < n {
		// One symbol per character at most: sized once, a long word (a
		// whole text, for tokenizers without a pre-tokenizer) does not
		// pay for doubling growth.
		syms = make([]symbol, 0, n)
	}
	add := func(id int32) {
		syms = append(syms, symbol{id: id, next: int32(len(syms)) + 1})
	}
	unkID, unkLen := int32(-1), 0
	for i := 0; i < len(w); {
		r, n := utf8.DecodeRune(w[i:])
		end := i + n
		if id, ok := m.charID(sc, w, i, end, r); ok {
			if unkLen > 0 {
				add(unkID)
				unkLen = 0
			}
			add(id)
			i = end
			continue
		}
		if m.byteFallback && m.byteFallbackOK(w[i:end]) {
			// As HF, a pending unk is not flushed here; it is emitted
			// when the next known character (or the end) arrives.
			for _, b := range w[i:end] {
				add(m.byteIDs[b])
			}
			i = end
			continue
		}
		if m.unkID >= 0 {
			switch {
			case unkLen > 0 && m.fuseUnk:
				unkLen += n
			case unkLen > 0:
				add(unkID)
				unkID, unkLen = m.unkID, n
			default:
				unkID, unkLen = m.unkID, n
			}
		}
		// With no unk token the character is dropped, as HF does.
		i = end
	}
	if unkLen > 0 {
		add(unkID)
	}
	if len(syms) == 0 {
		sc.syms = syms
		return out
	}
	syms[len(syms)-1].next = -1

	h := sc.heap[:0]
	if cap(h) < len(syms) {
		h = make([]mergeItem, 0, len(syms))
	}
	for i := 0; i+1 < len(syms); i++ {
		if v, ok := m.merges.get(pairKey(syms[i].id, syms[i+1].id)); ok {
			h = heapPush(h, newMergeItem(uint32(v>>32), int32(i)))
		}
	}
	for len(h) > 0 {
		var top mergeItem
		top, h = heapPop(h)
		pos := top.pos()
		cur := &syms[pos]
		if cur.id < 0 || cur.next < 0 {
			continue
		}
		rightPos := cur.next
		right := syms[rightPos]
		// Skip entries made stale by earlier merges.
		v, ok := m.merges.get(pairKey(cur.id, right.id))
		if !ok || uint32(v>>32) != top.rank() {
			continue
		}
		cur.id = int32(uint32(v))
		cur.next = right.next
		syms[rightPos].id = -1
		prev := pos - 1
		for prev >= 0 && syms[prev].id < 0 {
			prev--
		}
		if prev >= 0 {
			if v, ok := m.merges.get(pairKey(syms[prev].id, cur.id)); ok {
				h = heapPush(h, newMergeItem(uint32(v>>32), prev))
			}
		}
		if cur.next >= 0 {
			if v, ok := m.merges.get(pairKey(cur.id, syms[cur.next].id)); ok {
				h = heapPush(h, newMergeItem(uint32(v>>32), pos))
			}
		}
	}
	for i := range syms {
		if syms[i].id >= 0 {
			out = append(out, syms[i].id)
		}
	}
	sc.syms, sc.heap = syms, h
	return out
}

func (m *bpeModel) byteFallbackOK(b []byte) bool {
	for _, c := range b {
		if m.byteIDs[c] < 0 {
			return false
		}
	}
	return true
}

// The heap orders by rank, then by position, as HF's Merge ordering.
func mergeLess(a, b mergeItem) bool { return a < b }

func heapPush(h []mergeItem, x mergeItem) []mergeItem {
	h = append(h, x)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !mergeLess(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func heapPop(h []mergeItem) (mergeItem, []mergeItem) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && mergeLess(h[r], h[l]) {
			c = r
		}
		if !mergeLess(h[c], h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	return top, h
}
