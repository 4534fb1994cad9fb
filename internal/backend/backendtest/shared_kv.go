package backendtest

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
)

func init() {
	register("AttentionSharedKV", needs(runSharedKV, backend.FeatureSharedKV))
}

// runSharedKV: Gemma 4's KV-shared layers. Layer 2 of the store is Shared;
// its query attends over layer 0's K/V with nil k and v. Each step also
// stores the same k and v into layer 1 and attends there with the same
// query, which the shared read must equal, over a prefill and two decode
// steps of two sequences, with and without a window; at head dims 256
// and 512 too (Gemma 4 E's shared sliding and full layers, groups of 4,
// 6 and 8), where a GPU backend may take other decode kernels.
func runSharedKV(e *env) {
	for _, c := range []struct{ heads, kvh, hd, window int }{{4, 1, 32, 0}, {8, 2, 64, 8}, {8, 2, 256, 20}, {6, 1, 256, 0},
		{16, 2, 512, 0}, {4, 1, 512, 30}} {
		p := backend.AttnParams{Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))), Window: c.window}
		l := backend.KVLayer{KVHeads: c.kvh, HeadDim: c.hd, Window: c.window}
		shared := l
		shared.Shared = true
		kva, kvb := e.kvStores(backend.KVSpec{NumBlocks: 16, BlockSize: 16, Layers: []backend.KVLayer{l, l, shared}})
		tables := [][]int32{{3, 9, 1, 12}, {7, 0, 14, 5}}
		lens := []int{0, 0}
		for si, plan := range [][]int{{37, 20}, {1, 1}, {1, 1}} {
			T := e.planStep(plan, tables, lens)
			q, k, v := e.qkv(T, c.heads, c.kvh, c.hd)
			q2 := e.input(T, c.heads*c.hd, e.randn(T*c.heads*c.hd, 1))
			out, own, sh := e.poisoned(T, c.heads*c.hd), e.poisoned(T, c.heads*c.hd), e.poisoned(T, c.heads*c.hd)
			for i, be := range []backend.Backend{e.test, e.ref} {
				pick := func(p pair) backend.Tensor { return []backend.Tensor{p.a, p.b}[i] }
				kv := []backend.KVStore{kva, kvb}[i]
				be.Attention(pick(out), pick(q), pick(k), pick(v), kv, 0, p)
				be.Attention(pick(own), pick(q2), pick(k), pick(v), kv, 1, p)
				be.Attention(pick(sh), pick(q2), nil, nil, kv, 0, p)
			}
			name := fmt.Sprintf("AttentionSharedKV/h%d/kv%d/d%d/w%d/step%d", c.heads, c.kvh, c.hd, c.window, si)
			e.check(name+"/shared", sh, T)
			e.check(name+"/own", own, T)
			n := T * c.heads * c.hd
			got, want := make([]float32, n), make([]float32, n)
			e.test.ReadRows(sh.a, got)
			e.test.ReadRows(own.a, want)
			compare(e.t, e.opName(name)+"/shared-vs-own", got, want, e.tol(name, T))
		}
	}
}
