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
