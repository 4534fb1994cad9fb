//go:build linux

package cuda

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// TestMoEScratchReusedAcrossLayers records Qwen3-30B-A3B's MoE op for a
// prefill step of 8448 tokens (the server's default step: an 8192-token
// chunk plus 256 decode rows) over four layers without a device: each
// layer's ~1 GB of routing, gathered-row and expert-output scratch must be
// given back when the op ends, so every layer takes the same arena range
// and a step needs one layer's scratch, not one per layer (the serving
// out-of-memory of s15d/e).
func TestMoEScratchReusedAcrossLayers(t *testing.T) {
	b := hostOnlyBackend()
	const chunk = 2 << 30
	b.arena.chunks = []devBuf{{ptr: 1 << 40, size: chunk}}
	st := newQwen3Step(4)
	const T, hidden = 8448, 2048
	x := &Tensor{ptr: 1 << 34, rows: T, cols: hidden}
	dst := &Tensor{ptr: 1 << 35, rows: T, cols: hidden}
	p := backend.MoEParams{TopK: 8, Renorm: true, Act: backend.SiLU}
	var firstGather uintptr
	for i, l := range st.layers {
		before := b.arena
		b.rec.ls = b.rec.ls[:0]
		b.MoE(dst, x, l.router, l.experts, p)
		if b.err != nil {
			t.Fatalf("layer %d: %v", i, b.err)
		}
		if b.arena.cur != before.cur || b.arena.off != before.off {
			t.Fatalf("layer %d: MoE left the arena at chunk %d offset %d, was %d/%d: its scratch outlives the op",
				i, b.arena.cur, b.arena.off, before.cur, before.off)
		}
		names := launchNames(b)
		gather := -1
		for j, n := range names {
			if n == "moe_gather" {
				gather = j
			}
		}
		if gather < 0 {
			t.Fatalf("layer %d: launches %v: not the grouped GEMM path", i, names)
		}
		xs := uintptr(b.rec.ls[gather].args[0])
		if i == 0 {
			firstGather = xs
		} else if xs != firstGather {
			t.Errorf("layer %d gathers into %#x, layer 0 into %#x: same scratch wanted", i, xs, firstGather)
		}
	}
	if len(b.arena.chunks) != 1 {
		t.Errorf("arena grew to %d chunks", len(b.arena.chunks))
	}
}

// TestFreshArenaSkipsReleasedScratch: sample_rows' parameters are copied
// onto the stream ahead of the step's launches still being recorded, so
// their memory must be named by none of them. Memory an op gave back
// (here the MoE op's scratch) is named by launches that have not run:
// handing it out again there let the op's kernels overwrite the
// parameters after the copy (s16a: an illegal address in sample_rows at
// 64 rows, after Attention gave its split partials back).
func TestFreshArenaSkipsReleasedScratch(t *testing.T) {
	b := hostOnlyBackend()
	b.arena.chunks = []devBuf{{ptr: 1 << 40, size: 2 << 30}}
	st := newQwen3Step(1)
	const T, hidden = 512, 2048
	x := &Tensor{ptr: 1 << 34, rows: T, cols: hidden}
	dst := &Tensor{ptr: 1 << 35, rows: T, cols: hidden}
	b.MoE(dst, x, st.layers[0].router, st.layers[0].experts, backend.MoEParams{TopK: 8, Renorm: true, Act: backend.SiLU})
	if b.err != nil {
		t.Fatal(b.err)
	}
	var hi uintptr // the end of the furthest arena address a launch names
	lo, end := b.arena.chunks[0].ptr, b.arena.chunks[0].ptr+uintptr(b.arena.chunks[0].size)
	for _, l := range b.rec.ls {
		for _, a := range l.args {
			if p := uintptr(a); p >= lo && p < end && p > hi {
				hi = p
			}
		}
	}
	if hi == 0 {
		t.Fatal("no launch names the arena: not the path under test")
	}
	reused, err := b.arenaAlloc(256)
	if err != nil {
		t.Fatal(err)
	}
	if reused > hi {
		t.Fatalf("plain arenaAlloc at %#x, past the released scratch (%#x): the op did not give it back", reused, hi)
	}
	fresh, err := b.arenaAllocFresh(4096)
	if err != nil {
		t.Fatal(err)
	}
	if fresh <= hi {
		t.Errorf("arenaAllocFresh at %#x, inside scratch a recorded launch names (up to %#x)", fresh, hi)
	}
	b.arena.reset()
	if p, _ := b.arenaAllocFresh(256); p != lo {
		t.Errorf("after the rewind arenaAllocFresh at %#x, want the arena's start %#x", p, lo)
	}
}
