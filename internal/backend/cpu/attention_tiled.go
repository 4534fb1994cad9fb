package cpu

import (
	"math"
	"sync"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// Tiled attention: the queries of one sequence that share a KV head are
// taken 8 at a time, one per vector lane (attn_amd64.s). For each chunk of
// keys the kernels compute the 8 rows' scores at once (every key element
// is loaded once for all 8), fold them into an online softmax (running
// max and sum per lane, the accumulated output rescaled when the max
// grows), and add the probability-weighted values. So softmax work is
// vector work across rows instead of scalar work per (row, key), no score
// row longer than a chunk is ever stored, and K and V are read once per 8
// query rows instead of once per row.
//
// Rows are taken token-major: (token t, query heads of the group), then
// token t+1. A decode token fills 7 of 8 lanes with Qwen2.5's 7 query
// heads per KV head; a prefill chunk packs consecutive tokens, whose
// positions differ by one, so a lane group needs the same keys but the
// last one or two, which a mask removes.

// attnChunk is the number of keys per online-softmax step: 8 KiB of
// scores, which stay in L1 between the three kernels.
const attnChunk = 256

// maskedScore stands for a key a lane must not see. It is finite so that
// the online softmax never computes inf-inf: a lane whose first chunks are
// all masked accumulates garbage with weight exp(0), which the first real
// score wipes out (its rescale factor exp(-1e30 - m) is exactly 0), and
// each lane sees at least its own position.
const maskedScore = -1e30

// attnItem is up to 8 (token, query head) pairs of one sequence that share
// KV head kvh: pairs lo..lo+n-1 of the sequence's token-major list.
type attnItem struct {
	seq, kvh, lo, n int
	cost            int // keys times head dim, for scheduling
}

type attnScratch struct {
	qt, ot, st []float32
	ml         [24]float32 // running max, running sum, rescale factor
	items      []attnItem
	// offs[seqBase[i] + p - seqFirst[i]] is the float offset (row*kvw)
	// of position p of sequence i in the layer's K and V, for the
	// positions any of the sequence's queries reads, then 32 spare zeros
	// (the score kernel prefetches up to 12 entries past a chunk).
	offs              []int32
	seqBase, seqFirst []int
	// A chunk's keys and values of one KV head decoded from a store that
	// is not float32, and loc[i] = i*locDim their offsets (then 32 spare
	// zeros, as offs).
	kc, vc []float32
	loc    []int32
	locDim int
}

var attnPool = sync.Pool{New: func() any { return new(attnScratch) }}

func (b *Backend) attentionTiled(out, qt *Tensor, st *kvStore, layer int, p backend.AttnParams) {
	step := b.step
	group := p.Heads / p.KVHeads
	sc := attnPool.Get().(*attnScratch)
	defer attnPool.Put(sc)
	items := sc.items[:0]
	total := 0
	// Key offsets once per sequence, shared by its items and KV heads
	// (the kernels get the head's base, &K[kvh*HeadDim]).
	kvw := p.KVHeads * p.HeadDim
	sc.offs, sc.seqBase, sc.seqFirst = sc.offs[:0], sc.seqBase[:0], sc.seqFirst[:0]
	for si := range step.Seqs {
		s := &step.Seqs[si]
		lo, hi := math.MaxInt, 0
		for _, pos := range step.Positions[s.Start : s.Start+s.Len] {
			lo, hi = min(lo, int(pos)), max(hi, int(pos))
		}
		if p.Window > 0 {
			lo = max(0, lo-p.Window+1)
		} else {
			lo = 0
		}
		sc.seqBase = append(sc.seqBase, len(sc.offs))
		sc.seqFirst = append(sc.seqFirst, lo)
		sc.offs = st.offsets(sc.offs, layer, s, lo, hi, kvw, 0)
		for range 32 {
			sc.offs = append(sc.offs, 0)
		}
	}
	for si := range step.Seqs {
		s := &step.Seqs[si]
		pairs := s.Len * group
		for lo := 0; lo < pairs; lo += 8 {
			n := min(8, pairs-lo)
			last := int(step.Positions[s.Start+(lo+n-1)/group])
			keys := last + 1
			if p.Window > 0 {
				keys = min(keys, p.Window+1)
			}
			for kvh := range p.KVHeads {
				items = append(items, attnItem{seq: si, kvh: kvh, lo: lo, n: n, cost: keys * p.HeadDim})
				total += keys * p.HeadDim
			}
		}
	}
	sc.items = items
	// Items are handed out last first: later tokens see more keys, and
	// starting the long ones first leaves the short ones to even out the
	// end.
	if total*8 < 1<<17 || b.threads == 1 {
		for i := len(items) - 1; i >= 0; i-- {
			b.attnItem(items[i], sc, sc, out, qt, st, layer, p)
		}
		return
	}
	b.workers().run(len(items), func(t int) {
		w := attnPool.Get().(*attnScratch)
		b.attnItem(items[len(items)-1-t], w, sc, out, qt, st, layer, p)
		attnPool.Put(w)
	})
}

// attnItem computes the outputs of one item's rows, with the work
// buffers of sc and the key offsets of shared.
func (b *Backend) attnItem(it attnItem, sc, shared *attnScratch, out, q *Tensor, st *kvStore, layer int, p backend.AttnParams) {
	step := b.step
	s := &step.Seqs[it.seq]
	hd, group := p.HeadDim, p.Heads/p.KVHeads
	var rows, heads, pos, first [8]int
	kFirst, kLast := math.MaxInt, -1
	minPos, maxFirst := math.MaxInt, 0
	for l := range it.n {
		pair := it.lo + l
		rows[l] = s.Start + pair/group
		heads[l] = it.kvh*group + pair%group
		pos[l] = int(step.Positions[rows[l]])
		if p.Window > 0 {
			first[l] = max(0, pos[l]-p.Window+1)
		}
		kFirst, kLast = min(kFirst, first[l]), max(kLast, pos[l])
		minPos, maxFirst = min(minPos, pos[l]), max(maxFirst, first[l])
	}
	sc.qt = grow(sc.qt, hd*8)
	sc.ot = grow(sc.ot, hd*8)
	sc.st = grow(sc.st, attnChunk*8)
	qtr, ot, sct := sc.qt, sc.ot, sc.st
	// Transposed queries, pre-scaled; unused lanes stay 0 (their scores
	// are 0, harmless, and their outputs are dropped).
	clear(qtr)
	clear(ot)
	for l := range it.n {
		qv := q.Row(rows[l])[heads[l]*hd : (heads[l]+1)*hd]
		for d, x := range qv {
			qtr[d*8+l] = x * p.Scale
		}
	}
	for l := range 8 {
		sc.ml[l], sc.ml[8+l] = maskedScore, 0
	}
	// The output accumulator is [lane][dim] when the dim allows the
	// faster value kernel, else [dim][lane].
	rowMajor := hd%32 == 0
	kvOff := it.kvh * hd
	kb, vb := &st.k[layer], &st.v[layer]
	var K, V []float32
	if kb.f32 != nil {
		K, V = kb.f32[kvOff:], vb.f32[kvOff:]
	}
	offs, ob := shared.offs, shared.seqBase[it.seq]-shared.seqFirst[it.seq] // position c at offs[ob+c]
	// Chunks are aligned to absolute positions, so a lane meets the same
	// chunk boundaries (and its online softmax the same rescalings)
	// whichever lanes share its item: results must not depend on how
	// tokens are batched. Keys outside a lane's range are masked and add
	// exact zeros.
	for c0 := kFirst; c0 <= kLast; c0 = (c0/attnChunk + 1) * attnChunk {
		c1 := min((c0/attnChunk+1)*attnChunk, kLast+1)
		n := c1 - c0
		ck, cv, co := K, V, offs[ob+c0:]
		if K == nil {
			ck, cv, co = sc.decodeChunk(kb, vb, co[:n], kvOff, hd)
		}
		attnScores(&qtr[0], hd, &ck[0], &co[0], n, &sct[0], &cv[0])
		if p.Softcap > 0 {
			for i, x := range sct[:n*8] {
				sct[i] = p.Softcap * float32(math.Tanh(float64(x/p.Softcap)))
			}
		}
		// Only keys past the earliest lane's position or before the
		// latest lane's window need a per-lane check.
		for kp := max(c0, minPos+1); kp < c1; kp++ {
			for l := range it.n {
				if kp > pos[l] {
					sct[(kp-c0)*8+l] = maskedScore
				}
			}
		}
		for kp := c0; kp < min(c1, maxFirst); kp++ {
			for l := range it.n {
				if kp < first[l] {
					sct[(kp-c0)*8+l] = maskedScore
				}
			}
		}
		attnSoftmax(&sct[0], n, &sc.ml[0])
		if rowMajor {
			attnPVRows(&ot[0], hd, &cv[0], &co[0], n, &sct[0], &sc.ml[16])
		} else {
			attnPV(&ot[0], hd, &cv[0], &co[0], n, &sct[0], &sc.ml[16])
		}
	}
	sinks := sinkLogits(p)
	for l := range it.n {
		o := out.Row(rows[l])[heads[l]*hd : (heads[l]+1)*hd]
		den := sc.ml[8+l]
		if sinks != nil {
			// The sink's column, relative to the lane's running max.
			den += float32(math.Exp(float64(sinks[heads[l]] - sc.ml[l])))
		}
		inv := 1 / den
		if rowMajor {
			for d, x := range ot[l*hd : (l+1)*hd] {
				o[d] = x * inv
			}
			continue
		}
		for d := range o {
			o[d] = ot[d*8+l] * inv
		}
	}
}

// decodeChunk decodes the keys and values at offs (row offsets; the KV
// head's values start kvOff past them) into sc.kc and sc.vc, one after
// the other, and returns them with offsets into them. Once per item and
// chunk, so each stored key is decoded once per 8 query rows, as often as
// the float32 path loads it.
func (sc *attnScratch) decodeChunk(kb, vb *kvBuf, offs []int32, kvOff, hd int) (k, v []float32, loc []int32) {
	sc.kc = grow(sc.kc, attnChunk*hd)
	sc.vc = grow(sc.vc, attnChunk*hd)
	if sc.locDim != hd {
		sc.loc = sc.loc[:0]
		for i := range attnChunk {
			sc.loc = append(sc.loc, int32(i*hd))
		}
		sc.loc = append(sc.loc, make([]int32, 32)...)
		sc.locDim = hd
	}
	// The tiled path runs with the kernels and a head dim of a multiple
	// of 8, what decodeRows needs.
	kb.decodeRows(sc.kc, offs, kvOff, hd)
	vb.decodeRows(sc.vc, offs, kvOff, hd)
	return sc.kc, sc.vc, sc.loc
}

// offsets appends, for positions first..last of seq in layer, the float
// offset of the position's row plus off (a KV head's offset) to dst.
func (s *kvStore) offsets(dst []int32, layer int, seq *backend.SeqSlice, first, last, width, off int) []int32 {
	if s.ring[layer] {
		r := s.spec.RingTokens
		base := seq.Slot * r
		for j := first; j <= last; j++ {
			dst = append(dst, int32((base+j%r)*width+off))
		}
		return dst
	}
	bs := s.spec.BlockSize
	for j := first; j <= last; j++ {
		dst = append(dst, int32((int(seq.Blocks[j/bs])*bs+j%bs)*width+off))
	}
	return dst
}
