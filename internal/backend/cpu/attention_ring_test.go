package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// ringSeq is one simulated sequence: its slot, block table and length.
type ringSeq struct {
	slot   int
	blocks []int32
	n      int
}

// TestRingAttentionMatchesPaged runs the same random steps through a store
// with rings and one without: windowed layers must give bit-identical
// outputs (the ring reads the same keys in the same order). Sequences come
// and go (a new one reuses a finished one's slot and sees its stale ring),
// chunks are longer than the window, and positions wrap the ring many
// times. The ring is as short as the contract allows (window-1+chunk), so
// an off-by-one in the bound shows.
func TestRingAttentionMatchesPaged(t *testing.T) {
	const (
		window, maxChunk = 5, 12
		bs, slots        = 4, 6
		steps            = 150
	)
	be := New(2)
	rng := rand.New(rand.NewPCG(1, 2))
	params := []backend.AttnParams{
		{Heads: 4, KVHeads: 2, HeadDim: 16, Scale: 0.25},                            // full
		{Heads: 4, KVHeads: 2, HeadDim: 16, Scale: 0.25, Window: window},            // sliding
		{Heads: 6, KVHeads: 1, HeadDim: 32, Scale: 0.2, Window: window, Softcap: 3}, // sliding, MQA, softcap
	}
	var layers []backend.KVLayer
	for _, p := range params {
		layers = append(layers, backend.KVLayer{KVHeads: p.KVHeads, HeadDim: p.HeadDim, Window: p.Window})
	}
	ringSpec := backend.KVSpec{NumBlocks: 512, BlockSize: bs, Layers: layers, Slots: slots, RingTokens: window - 1 + maxChunk}
	paged := ringSpec
	paged.Slots, paged.RingTokens = 0, 0
	ringKV, err := be.NewKVStore(ringSpec)
	if err != nil {
		t.Fatal(err)
	}
	pagedKV, err := be.NewKVStore(paged)
	if err != nil {
		t.Fatal(err)
	}

	// Block ids are handed out in a shuffled order so a block-table bug
	// in the paged path shows too; a finished sequence's blocks are not
	// reused, which keeps the bookkeeping trivial.
	free := rng.Perm(ringSpec.NumBlocks)
	var live []*ringSeq
	freeSlots := rng.Perm(slots)
	maxPos := 0
	for step := range steps {
		// Retire a long sequence now and then so its slot is reused.
		if len(live) > 0 && rng.IntN(6) == 0 {
			i := rng.IntN(len(live))
			freeSlots = append(freeSlots, live[i].slot)
			live = append(live[:i], live[i+1:]...)
		}
		for len(live) < 4 && len(freeSlots) > 0 {
			live = append(live, &ringSeq{slot: freeSlots[0]})
			freeSlots = freeSlots[1:]
		}
		b := &backend.Batch{}
		for _, s := range live {
			if rng.IntN(4) == 0 {
				continue // not in this step
			}
			n := 1
			if rng.IntN(2) == 0 {
				n = 1 + rng.IntN(maxChunk)
			}
			for len(s.blocks)*bs < s.n+n {
				s.blocks = append(s.blocks, int32(free[0]))
				free = free[1:]
			}
			b.Seqs = append(b.Seqs, backend.SeqSlice{Start: len(b.Tokens), Len: n, Blocks: s.blocks, Slot: s.slot})
			for i := range n {
				b.Tokens = append(b.Tokens, 0)
				b.Positions = append(b.Positions, int32(s.n+i))
			}
			s.n += n
			maxPos = max(maxPos, s.n)
		}
		if len(b.Tokens) == 0 {
			continue
		}
		if err := be.BeginStep(b); err != nil {
			t.Fatal(err)
		}
		T := len(b.Tokens)
		for l, p := range params {
			q := randTensor(be, rng, T, p.Heads*p.HeadDim)
			k := randTensor(be, rng, T, p.KVHeads*p.HeadDim)
			v := randTensor(be, rng, T, p.KVHeads*p.HeadDim)
			got := be.NewTensor(T, p.Heads*p.HeadDim).(*Tensor)
			want := be.NewTensor(T, p.Heads*p.HeadDim).(*Tensor)
			be.Attention(got, q, k, v, ringKV, l, p)
			be.Attention(want, q, k, v, pagedKV, l, p)
			for i, x := range want.Data() {
				if got.Data()[i] != x {
					t.Fatalf("step %d layer %d: element %d is %g through the ring, %g paged", step, l, i, got.Data()[i], x)
				}
			}
		}
	}
	if laps := maxPos / ringSpec.RingTokens; laps < 5 {
		t.Errorf("the longest sequence wrapped the ring only %d times", laps)
	}
}

func randTensor(be *Backend, rng *rand.Rand, rows, cols int) *Tensor {
	x := be.NewTensor(rows, cols).(*Tensor)
	for i := range x.d {
		x.d[i] = float32(rng.NormFloat64())
	}
	return x
}

// TestRingMemoryIsBounded: a windowed layer's KV bytes depend on Slots and
// RingTokens only, not on NumBlocks; full layers (and windowed ones
// without rings) still scale with the block count.
func TestRingMemoryIsBounded(t *testing.T) {
	be := New(1)
	layers := []backend.KVLayer{{KVHeads: 2, HeadDim: 16}, {KVHeads: 2, HeadDim: 16, Window: 8}}
	bytes := func(blocks, slots, ring int) (full, windowed int) {
		kv, err := be.NewKVStore(backend.KVSpec{NumBlocks: blocks, BlockSize: 16, Layers: layers, Slots: slots, RingTokens: ring})
		if err != nil {
			t.Fatal(err)
		}
		s := kv.(*kvStore)
		return s.bytes(0), s.bytes(1)
	}
	const slots, ring = 4, 40
	wantRing := 2 * 4 * slots * ring * 2 * 16 // K and V, f32
	for _, blocks := range []int{10, 100, 1000} {
		full, win := bytes(blocks, slots, ring)
		if win != wantRing {
			t.Errorf("%d blocks: windowed layer %d bytes, want %d", blocks, win, wantRing)
		}
		if want := 2 * 4 * blocks * 16 * 2 * 16; full != want {
			t.Errorf("%d blocks: full layer %d bytes, want %d", blocks, full, want)
		}
		if _, paged := bytes(blocks, 0, 0); paged != full {
			t.Errorf("%d blocks without rings: windowed layer %d bytes, want the paged %d", blocks, paged, full)
		}
	}
	if _, err := be.NewKVStore(backend.KVSpec{NumBlocks: 4, BlockSize: 16, Layers: layers, Slots: 2, RingTokens: 7}); err == nil {
		t.Error("a ring shorter than the window was accepted")
	}
}

// TestRingMisuseFails: slots out of range or shared within a step, and a
// chunk too long for the ring, would corrupt other sequences' keys
// silently; they must fail loudly instead.
func TestRingMisuseFails(t *testing.T) {
	be := New(1)
	p := backend.AttnParams{Heads: 1, KVHeads: 1, HeadDim: 4, Scale: 1, Window: 4}
	kv, err := be.NewKVStore(backend.KVSpec{NumBlocks: 8, BlockSize: 4,
		Layers: []backend.KVLayer{{KVHeads: 1, HeadDim: 4, Window: 4}}, Slots: 2, RingTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	blocks := []int32{0, 1, 2, 3}
	for _, tc := range []struct {
		name string
		seqs []backend.SeqSlice
	}{
		{"slot out of range", []backend.SeqSlice{{Start: 0, Len: 1, Blocks: blocks, Slot: 2}}},
		{"negative slot", []backend.SeqSlice{{Start: 0, Len: 1, Blocks: blocks, Slot: -1}}},
		{"shared slot", []backend.SeqSlice{{Start: 0, Len: 1, Blocks: blocks, Slot: 1}, {Start: 1, Len: 1, Blocks: blocks, Slot: 1}}},
		{"chunk overflows ring", []backend.SeqSlice{{Start: 0, Len: 6, Blocks: blocks}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &backend.Batch{Seqs: tc.seqs}
			for _, s := range tc.seqs {
				for i := range s.Len {
					b.Tokens = append(b.Tokens, 0)
					b.Positions = append(b.Positions, int32(i))
				}
			}
			if err := be.BeginStep(b); err != nil {
				t.Fatal(err)
			}
			T := len(b.Tokens)
			x := be.NewTensor(T, 4)
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			be.Attention(be.NewTensor(T, 4), x, x, x, kv, 0, p)
		})
	}
	// A 5-token chunk with window 4 needs 4-1+5 = 8 positions: it fits.
	b := &backend.Batch{Tokens: make([]int32, 5), Positions: []int32{0, 1, 2, 3, 4},
		Seqs: []backend.SeqSlice{{Start: 0, Len: 5, Blocks: blocks, Slot: 1}}}
	if err := be.BeginStep(b); err != nil {
		t.Fatal(err)
	}
	x := be.NewTensor(5, 4)
	be.Attention(be.NewTensor(5, 4), x, x, x, kv, 0, p)
}
