package grammar

import (
	"bytes"
	"slices"
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
	size   int      // mask width: the model's vocabulary (logit row length)
	ids    []int32  // token ids in byte order
	off    []uint32 // ids[i]'s bytes are data[off[i]:off[i+1]]
	data   []byte
	lcp    []uint16 // common prefix length with the token before
	maxLen int
	byID   [][]byte // bytes by id, nil for tokens never allowed
}

// NewVocab reads src's tokens; size is the model's vocabulary (logits
// per row), which may exceed the tokenizer's: ids past it are never
// allowed.
func NewVocab(src TokenSource, size int) *Vocab {
	v := &Vocab{size: size, byID: make([][]byte, size)}
	n := min(size, src.VocabSize())
	for id := range int32(n) {
		if src.IsSpecial(id) {
			continue
		}
		if b := src.TokenBytes(id); len(b) > 0 {
			v.byID[id] = slices.Clip(b)
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
		prev = b
	}
	v.off = append(v.off, uint32(len(v.data)))
	return v
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

// Tokens is the number of tokens a constraint can ever allow.
func (v *Vocab) Tokens() int { return len(v.ids) }

// mask computes the tokens whose whole byte string the automaton can
// read from state s. Tokens come in byte order, so a token walks only
// the bytes after the prefix it shares with the previous one, and a
// token whose shared prefix already died is rejected without a walk.
func (v *Vocab) mask(d *dfa, s int32, out []uint64) {
	stack := make([]int32, v.maxLen+1)
	stack[0] = s
	trans, nclass, classOf := d.trans, d.nclass, &d.classOf
	alive := 0 // bytes of the previous token the automaton read
	for i, id := range v.ids {
		l := int(v.lcp[i])
		if l > alive {
			continue // extends a prefix that already died
		}
		tok := v.data[v.off[i]:v.off[i+1]]
		k, st := l, stack[l]
		for k < len(tok) {
			st = trans[int(st)*nclass+int(classOf[tok[k]])]
			if st < 0 {
				break
			}
			k++
			stack[k] = st
		}
		alive = k
		if k == len(tok) {
			out[id>>6] |= 1 << (id & 63)
		}
	}
}
