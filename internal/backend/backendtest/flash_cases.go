package backendtest

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
)

func init() {
	register("AttentionPrefill", runPrefillAttention)
}

// runPrefillAttention covers prompts long enough for a GPU backend's tiled
// prefill kernels to take every path: several query tiles per sequence,
// keys over many key tiles, two sequences of ragged lengths in one step, a
// chunk whose keys start in an earlier step (next to a one-token
// sequence), GQA, sliding windows that start mid-tile and softcaps, at
// head dims 64, 128, 256 and 512 (Gemma 4's sliding and global layers)
// with scattered cache blocks of several sizes (5 and 7: block sizes that
// are not powers of two, walked key by key). The chunks of 300, 150 and
// 200 rows end in partial query tiles of 44, 22 and 72 rows (a GPU
// backend that serves a tile in halves of 64 rows gets an empty, a
// partial and a full half).
func runPrefillAttention(e *env) {
	for _, c := range []struct {
		heads, kvh, hd, bs, window int
		softcap                    float32
	}{{8, 2, 128, 16, 0, 0}, {4, 1, 64, 32, 0, 0}, {4, 2, 128, 16, 100, 0}, {6, 3, 64, 8, 77, 30}, {4, 4, 128, 16, 0, 50}, {8, 4, 128, 5, 200, 0},
		{4, 2, 256, 16, 0, 0}, {2, 1, 256, 7, 100, 30}, {4, 2, 512, 16, 0, 50}, {2, 1, 512, 5, 77, 0}} {
		p := backend.AttnParams{Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))),
			Window: c.window, Softcap: c.softcap}
		// Each step: how many new tokens each sequence gets.
		plan := [][]int{{300, 150}, {200, 1}}
		need := []int{0, 0}
		for _, st := range plan {
			for s, n := range st {
				need[s] += n
			}
		}
		nb0, nb1 := (need[0]+c.bs-1)/c.bs, (need[1]+c.bs-1)/c.bs
		spec := backend.KVSpec{NumBlocks: nb0 + nb1 + 3, BlockSize: c.bs, Layers: []backend.KVLayer{{KVHeads: c.kvh, HeadDim: c.hd}}}
		kva, kvb := e.kvStores(spec)
		perm := e.rng.Perm(spec.NumBlocks)
		tables := [][]int32{{}, {}}
		for i, blk := range perm[:nb0+nb1] {
			s := 0
			if i >= nb0 {
				s = 1
			}
			tables[s] = append(tables[s], int32(blk))
		}
		lens := []int{0, 0}
		for si, st := range plan {
			T := e.planStep(st, tables, lens)
			q, k, v := e.qkv(T, c.heads, c.kvh, c.hd)
			out := e.poisoned(T, c.heads*c.hd)
			e.test.Attention(out.a, q.a, k.a, v.a, kva, 0, p)
			e.ref.Attention(out.b, q.b, k.b, v.b, kvb, 0, p)
			e.check(fmt.Sprintf("AttentionPrefill/h%d/kv%d/d%d/bs%d/win%d/cap%g/step%d", c.heads, c.kvh, c.hd, c.bs, c.window, c.softcap, si), out, T)
		}
	}
}
