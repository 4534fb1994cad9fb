package tokenizer

import "unicode/utf8"

// A tokenizer without a pre-tokenizer (SentencePiece-style BPE: Llama 2,
// Mistral, Gemma, the embedded stories260k) merges a whole text as one
// word, and the merge scratch is 16 bytes a character: 250 MB for a 15
// MiB /tokenize body. A merge only joins a symbol ending at character i
// to one starting at i+1, so between two characters a, b of the
// vocabulary such that no merge joins a token ending in a to a token
// starting with b, no merge ever crosses: the word is cut there into
// pieces merged one at a time, with scratch the size of a piece and the
// same ids (merges are local to adjacent pairs, so the pieces'
// interleaving in rank order does not matter).

// longPiece is how long a piece grows before the next safe cut is taken
// (a variable for the tests).
var longPiece = 1 << 15

// crossPairs is the set of (last rune of left, first rune of right) over
// the merges, built on the first long word.
func (m *bpeModel) crossPairs() map[uint64]struct{} {
	m.crossOnce.Do(func() {
		m.cross = map[uint64]struct{}{}
		for _, s := range m.merges.slots {
			if s.k == 0 {
				continue
			}
			key := s.k - 1
			l, r := m.vocab.toks[int32(key>>32)], m.vocab.toks[int32(uint32(key))]
			a, _ := utf8.DecodeLastRuneInString(l)
			b, _ := utf8.DecodeRuneInString(r)
			m.cross[uint64(uint32(a))<<32|uint64(uint32(b))] = struct{}{}
		}
	})
	return m.cross
}

// mergeLong merges w piece by piece, cutting after longPiece bytes at the
// first boundary between two vocabulary characters no merge joins.
// Without prefix or suffix only: then a character's token is its text.
func (m *bpeModel) mergeLong(sc *bpeScratch, w []byte, out []int32) []int32 {
	cross := m.crossPairs()
	start := 0
	prev, prevKnown := rune(0), false
	for i := 0; i < len(w); {
		r, n := utf8.DecodeRune(w[i:])
		_, known := m.charID(sc, w, i, i+n, r)
		if known && prevKnown && i-start >= longPiece {
			if _, joined := cross[uint64(uint32(prev))<<32|uint64(uint32(r))]; !joined {
				out = m.mergeWord(sc, w[start:i], out)
				start = i
			}
		}
		prev, prevKnown = r, known
		i += n
	}
	return m.mergeWord(sc, w[start:], out)
}
