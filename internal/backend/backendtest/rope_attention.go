package backendtest

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
)

func init() {
	register("AttentionRoPE", runRoPEAttention)
}

// runRoPEAttention drives RoPE of q and k followed by attention, the order
// model code uses, through a prefill step and two decode steps of two
// sequences, so a backend that folds the rotation into its decode
// attention is checked on the attention output and on the rotated q and k
// it must still leave behind: full and partial rotary dims, an attention
// factor on cos/sin, GQA, at head dims 64 and 128.
func runRoPEAttention(e *env) {
	for _, c := range []struct {
		heads, kvh, hd, rotary int
		scale                  float32
	}{{8, 2, 128, 128, 1}, {4, 4, 64, 32, 1}, {8, 1, 128, 64, 1.2}} {
		p := backend.AttnParams{Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd)))}
		spec := backend.KVSpec{NumBlocks: 16, BlockSize: 16, Layers: []backend.KVLayer{{KVHeads: c.kvh, HeadDim: c.hd}}}
		kva, kvb := e.kvStores(spec)
		inv := make([]float32, c.rotary/2)
		for i := range inv {
			inv[i] = float32(math.Pow(500000, -2*float64(i)/float64(c.rotary)))
		}
		rope := backend.RoPE{InvFreq: inv, RotaryDim: c.rotary, Scale: c.scale}
		tables := [][]int32{{3, 9, 1, 12}, {7, 0, 14, 5}}
		lens := []int{0, 0}
		for si, plan := range [][]int{{37, 20}, {1, 1}, {1, 1}} {
			T := e.planStep(plan, tables, lens)
			q, k, v := e.qkv(T, c.heads, c.kvh, c.hd)
			out := e.poisoned(T, c.heads*c.hd)
			for i, be := range []backend.Backend{e.test, e.ref} {
				pick := func(p pair) backend.Tensor { return []backend.Tensor{p.a, p.b}[i] }
				kv := []backend.KVStore{kva, kvb}[i]
				be.ApplyRoPE(pick(q), c.heads, c.hd, rope)
				be.ApplyRoPE(pick(k), c.kvh, c.hd, rope)
				be.Attention(pick(out), pick(q), pick(k), pick(v), kv, 0, p)
			}
			name := fmt.Sprintf("AttentionRoPE/h%d/kv%d/d%d/rot%d/step%d", c.heads, c.kvh, c.hd, c.rotary, si)
			e.check(name+"/out", out, T)
			e.check(name+"/q", q, T)
			e.check(name+"/k", k, T)
		}
	}
}
