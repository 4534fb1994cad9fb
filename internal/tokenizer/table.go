package tokenizer

import (
	"hash/maphash"
	"math/bits"
)

// Flat open-addressing tables for the vocabulary and the merges. Loading
// Gemma's 262k-token vocabulary means ~1.5M string lookups while resolving
// its merges; Go maps spend several cache misses per lookup there (control
// word, slot, key bytes), these one probe line plus the key bytes.

var tableSeed = maphash.MakeSeed()

// strTable maps a token string to its id. Slots hold a 32-bit hash tag
// and id+1 (0 = empty); the string itself is checked against toks.
type strTable struct {
	slots []uint64
	mask  uint64
	toks  []string // id -> token
	n     int
}

func newStrTable(toks []string, capacity int) *strTable {
	size := 1 << bits.Len(uint(max(capacity, 1)*2-1))
	return &strTable{slots: make([]uint64, size), mask: uint64(size - 1), toks: toks}
}

func (t *strTable) find(b []byte) (uint64, uint32) {
	h := maphash.Bytes(tableSeed, b)
	tag := uint32(h >> 32)
	i := h & t.mask
	for {
		e := t.slots[i]
		if e == 0 {
			return i, tag
		}
		if uint32(e>>32) == tag && t.toks[uint32(e)-1] == string(b) {
			return i, tag
		}
		i = (i + 1) & t.mask
	}
}

// put maps toks[id] to id; a repeated key keeps the last id, as a JSON
// object decoded into a map does.
func (t *strTable) put(id int32) {
	i, tag := t.find([]byte(t.toks[id]))
	if t.slots[i] == 0 {
		t.n++
	}
	t.slots[i] = uint64(tag)<<32 | uint64(uint32(id)+1)
}

func (t *strTable) get(b []byte) (int32, bool) {
	i, _ := t.find(b)
	e := t.slots[i]
	return int32(uint32(e)) - 1, e != 0
}

// getBatch looks up several keys (ids[i] = -1 when missing). Each phase
// issues independent loads for all keys so their cache misses overlap;
// one key at a time, resolving Gemma's 514k merges is miss-bound.
func (t *strTable) getBatch(keys [][]byte, ids []int32) {
	var hs [96]uint64
	var es [96]uint64
	hs2, es2 := hs[:len(keys)], es[:len(keys)]
	for i, k := range keys {
		h := maphash.Bytes(tableSeed, k)
		hs2[i] = h
		es2[i] = t.slots[h&t.mask]
	}
	for i, k := range keys {
		e := es2[i]
		if e != 0 && uint32(e>>32) == uint32(hs2[i]>>32) && t.toks[uint32(e)-1] == string(k) {
			ids[i] = int32(uint32(e)) - 1
			continue
		}
		id, ok := t.get(k)
		if !ok {
			id = -1
		}
		ids[i] = id
	}
}

func (t *strTable) getString(s string) (int32, bool) {
	// The conversion does not allocate: b is only read during the call.
	return t.get([]byte(s))
}

// pairTable maps a merge pair key to rank<<32 | new id.
type pairTable struct {
	slots []pairSlot
	shift uint
}

type pairSlot struct{ k, v uint64 } // k = key+1, 0 = empty

func newPairTable(n int) *pairTable {
	b := bits.Len(uint(n*5/3 + 1)) // load factor at most 0.6
	return &pairTable{slots: make([]pairSlot, 1<<b), shift: uint(64 - b)}
}

func (t *pairTable) put(key, val uint64) {
	k := key + 1
	mask := uint64(len(t.slots) - 1)
	for i := (k * 0x9E3779B97F4A7C15) >> t.shift; ; i = (i + 1) & mask {
		if s := &t.slots[i]; s.k == 0 || s.k == k {
			s.k, s.v = k, val
			return
		}
	}
}

func (t *pairTable) get(key uint64) (uint64, bool) {
	k := key + 1
	mask := uint64(len(t.slots) - 1)
	for i := (k * 0x9E3779B97F4A7C15) >> t.shift; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.k == k {
			return s.v, true
		}
		if s.k == 0 {
			return 0, false
		}
	}
}
