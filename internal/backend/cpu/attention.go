package cpu

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// kvStore keeps each layer's K and V in one of two layouts:
//   - paged, [block][offset][kvHead][headDim]: full-attention layers, and
//     every layer when the spec has no rings;
//   - ring, [slot][ring index][kvHead][headDim] with position p at index
//     p % RingTokens: windowed layers when the spec has Slots and
//     RingTokens. Their size is Slots*RingTokens positions whatever
//     NumBlocks is, which is what bounds sliding-window memory.
type kvStore struct {
	spec  backend.KVSpec
	k, v  []kvBuf
	ring  []bool        // per layer: stored as per-slot rings
	delta []*deltaState // per layer: recurrent state (deltanet.go), or nil
}

func (s *kvStore) Spec() backend.KVSpec { return s.spec }

func (b *Backend) NewKVStore(spec backend.KVSpec) (backend.KVStore, error) {
	if spec.NumBlocks <= 0 || spec.BlockSize <= 0 {
		return nil, fmt.Errorf("cpu: KV store needs positive block count and size")
	}
	if spec.Slots < 0 || spec.RingTokens < 0 || spec.Snapshots < 0 {
		return nil, fmt.Errorf("cpu: KV store slots %d, ring tokens %d and snapshots %d must not be negative", spec.Slots, spec.RingTokens, spec.Snapshots)
	}
	dt, err := kvDtype(spec.Dtype)
	if err != nil {
		return nil, err
	}
	s := &kvStore{spec: spec}
	for i, l := range spec.Layers {
		n, ring, state := kvLayout(spec, l)
		var ds *deltaState
		switch {
		case l.Recurrent():
			if ds, err = newDeltaState(spec, l, i, state); err != nil {
				return nil, err
			}
		case ring && spec.RingTokens < l.Window:
			// A ring shorter than the window could not hold even one
			// query's keys; Attention checks the stricter per-chunk bound.
			return nil, fmt.Errorf("cpu: layer %d: ring of %d tokens is shorter than its window of %d", i, spec.RingTokens, l.Window)
		}
		s.delta = append(s.delta, ds)
		s.ring = append(s.ring, ring)
		s.k = append(s.k, newKVBuf(dt, n))
		s.v = append(s.v, newKVBuf(dt, n))
	}
	return s, nil
}

// kvLayout is how the store keeps layer l: n floats each of K and V, in
// per-slot rings or paged, and the floats of its recurrent state.
func kvLayout(spec backend.KVSpec, l backend.KVLayer) (n int, ring bool, state int) {
	switch {
	case l.Shared:
		return 0, false, 0 // reads another layer's K/V (FeatureSharedKV)
	case l.Recurrent():
		// No K/V: per-slot state of a size independent of the context,
		// for the slots and then the snapshot places (SaveSlot).
		return 0, false, (spec.Slots + spec.Snapshots) * l.DeltaNet.StateFloats()
	case spec.InRing(l):
		return (spec.Slots + spec.Snapshots) * spec.RingTokens * l.KVHeads * l.HeadDim, true, 0
	}
	return spec.NumBlocks * spec.BlockSize * l.KVHeads * l.HeadDim, false, 0
}

// KVStoreBytes is what NewKVStore(spec) allocates (backend.KVSizer): K
// and V at spec.Dtype, the recurrent state in float32 whatever the dtype
// (it is rewritten every step, so rounding it would compound). A dtype
// NewKVStore refuses counts as float32.
func (b *Backend) KVStoreBytes(spec backend.KVSpec) int64 {
	elem := int64(4)
	if dt, err := kvDtype(spec.Dtype); err == nil {
		elem = int64(dt.Bytes())
	}
	var n int64
	for _, l := range spec.Layers {
		kv, _, state := kvLayout(spec, l)
		n += 2*elem*int64(kv) + 4*int64(state)
	}
	return n
}

// bytes is the memory of layer's K and V (tests).
func (s *kvStore) bytes(layer int) int {
	n := s.k[layer].bytes() + s.v[layer].bytes()
	if d := s.delta[layer]; d != nil {
		n += 4 * len(d.data)
	}
	return n
}

// row is the index, in units of one position's KVHeads*HeadDim values, of
// position pos of sequence seq in layer.
func (s *kvStore) row(layer int, seq *backend.SeqSlice, pos int) int {
	if s.ring[layer] {
		r := s.spec.RingTokens
		return seq.Slot*r + pos%r
	}
	bs := s.spec.BlockSize
	return int(seq.Blocks[pos/bs])*bs + pos%bs
}

// rows appends the store rows of positions first..pos of seq in layer to
// dst. One loop per layout keeps the per-key work to an add or a lookup.
func (s *kvStore) rows(dst []int, layer int, seq *backend.SeqSlice, first, pos int) []int {
	if s.ring[layer] {
		r := s.spec.RingTokens
		base := seq.Slot * r
		for j := first; j <= pos; j++ {
			dst = append(dst, base+j%r)
		}
		return dst
	}
	bs := s.spec.BlockSize
	for j := first; j <= pos; j++ {
		dst = append(dst, int(seq.Blocks[j/bs])*bs+j%bs)
	}
	return dst
}

// checkRing panics when the step breaks what a ring layer relies on: a
// wrong slot or an over-long chunk would silently read another sequence's
// keys or keys overwritten in this very step. The engine turns the panic
// into an error for the step's requests.
func (s *kvStore) checkRing(layer int, step *backend.Batch, p backend.AttnParams) {
	w := s.spec.Layers[layer].Window
	if p.Window <= 0 || p.Window > w {
		panic(fmt.Sprintf("cpu: layer %d: attention window %d does not fit the KV store's window %d", layer, p.Window, w))
	}
	used := make([]bool, s.spec.Slots)
	for _, q := range step.Seqs {
		if q.Slot < 0 || q.Slot >= s.spec.Slots || used[q.Slot] {
			panic(fmt.Sprintf("cpu: sequence slot %d is out of [0, %d) or used twice in one step", q.Slot, s.spec.Slots))
		}
		used[q.Slot] = true
		if p.Window-1+q.Len > s.spec.RingTokens {
			panic(fmt.Sprintf("cpu: a %d-token chunk with window %d overflows the %d-token ring", q.Len, p.Window, s.spec.RingTokens))
		}
	}
}

func (b *Backend) Attention(dst, q, k, v backend.Tensor, kv backend.KVStore, layer int, p backend.AttnParams) {
	st := kv.(*kvStore)
	out, qt := dst.(*Tensor), q.(*Tensor)
	kvw := p.KVHeads * p.HeadDim
	K, V := &st.k[layer], &st.v[layer]
	step := b.step
	if st.ring[layer] {
		st.checkRing(layer, step, p)
	}
	// Store this step's keys and values first: every query below may read
	// any earlier position of its own sequence (the ring bound makes that
	// hold for rings too).
	// nil k and v: a KV-shared layer reads layer's K/V as stored.
	for i := range step.Seqs {
		if k == nil && v == nil {
			break
		}
		kt, vt := k.(*Tensor), v.(*Tensor)
		s := &step.Seqs[i]
		for r := s.Start; r < s.Start+s.Len; r++ {
			row := st.row(layer, s, int(step.Positions[r]))
			K.put(row*kvw, kt.Row(r))
			V.put(row*kvw, vt.Row(r))
		}
	}
	// The kernels address keys by int32 float offsets and walk the head
	// dim 8 at a time.
	if !useAsm || p.HeadDim%8 != 0 || K.len() > math.MaxInt32 {
		seqOf := make([]int, qt.rows)
		for i, s := range step.Seqs {
			for r := s.Start; r < s.Start+s.Len; r++ {
				seqOf[r] = i
			}
		}
		b.attentionRef(out, qt, st, layer, p, seqOf)
		return
	}
	b.attentionTiled(out, qt, st, layer, p)
}

// sinkLogits returns p's per-head attention sinks (nil: none).
func sinkLogits(p backend.AttnParams) []float32 {
	if p.Sinks == nil {
		return nil
	}
	return p.Sinks.(*weight).dense
}
