package backendtest

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

func init() {
	register("AttentionBatchDecode", runBatchDecodeAttention)
}

// runBatchDecodeAttention drives decode steps of many sequences at ragged
// contexts (1 to ~200 keys, scattered block tables), the shape serving
// under load gives and a GPU backend may run on another kernel than a
// few sequences: GQA groups of 4, 7 and 8, head dims 64 and 128, a window,
// a softcap, attention sinks; at head dims 256 (Qwen3.5's groups of 8 and 6, Gemma's of 2
// with a window, 16) and 512 (Gemma 4's full layers: 8; 6 with a softcap). As a decoder layer issues them, q and k are rotated (and in
// one case normalised per head first) just before attention with
// ScratchQK set, so a backend may fold both into its kernel and leave q
// and k unwritten: only the outputs are compared.
func runBatchDecodeAttention(e *env) {
	for _, c := range []struct {
		seqs, heads, kvh, hd, window int
		softcap                      float32
		norms, sinks                 bool
	}{{64, 32, 8, 128, 0, 0, false, false}, {20, 28, 4, 128, 0, 0, true, false}, {17, 16, 2, 64, 0, 0, false, false},
		{24, 8, 2, 128, 40, 0, false, false}, {16, 8, 4, 64, 0, 30, false, false},
		{16, 16, 2, 256, 0, 0, true, false}, {9, 24, 4, 256, 0, 0, false, false}, {13, 16, 8, 256, 50, 0, false, false}, {6, 32, 2, 256, 0, 30, false, false},
		{11, 16, 2, 512, 0, 0, false, false}, {5, 6, 1, 512, 0, 30, true, false}, {7, 4, 4, 512, 60, 0, false, false},
		// gpt-oss's attention sinks, groups of 8 at head dim 64, with its
		// 128-token window and without.
		{24, 16, 2, 64, 128, 0, false, true}, {12, 8, 1, 64, 0, 0, false, true}} {
		const bs, steps = 16, 3
		prompt := make([]int, c.seqs)
		tables := make([][]int32, c.seqs)
		used := 0
		for s := range prompt {
			prompt[s] = 1 + e.rng.Intn(200)
			used += (prompt[s] + steps + bs - 1) / bs
		}
		perm := e.rng.Perm(used)
		for s := range prompt {
			n := (prompt[s] + steps + bs - 1) / bs
			tables[s], perm = toInt32(perm[:n]), perm[n:]
		}
		spec := backend.KVSpec{NumBlocks: used, BlockSize: bs, Layers: []backend.KVLayer{{KVHeads: c.kvh, HeadDim: c.hd}}}
		kva, kvb := e.kvStores(spec)
		p := backend.AttnParams{Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))),
			Window: c.window, Softcap: c.softcap, ScratchQK: true}
		pb := p
		if c.sinks {
			sk := e.weight(denseHost("sinks", []int{c.heads}, e.randn(c.heads, 2), tensor.F32))
			p.Sinks, pb.Sinks = sk.a, sk.b
		}
		inv := make([]float32, c.hd/2)
		for i := range inv {
			inv[i] = float32(math.Pow(500000, -2*float64(i)/float64(c.hd)))
		}
		rope := backend.RoPE{InvFreq: inv, RotaryDim: c.hd, Scale: 1}
		qn := e.weight(denseHost("qn", []int{c.hd}, e.randn(c.hd, 1), tensor.BF16))
		kn := e.weight(denseHost("kn", []int{c.hd}, e.randn(c.hd, 1), tensor.BF16))
		ones := make([]int, c.seqs)
		for s := range ones {
			ones[s] = 1
		}
		lens := make([]int, c.seqs)
		for si, plan := range [][]int{prompt, ones, ones} {
			T := e.planStep(plan, tables, lens)
			q, k, v := e.qkv(T, c.heads, c.kvh, c.hd)
			out := e.poisoned(T, c.heads*c.hd)
			for i, be := range []backend.Backend{e.test, e.ref} {
				pick := func(p pair) backend.Tensor { return []backend.Tensor{p.a, p.b}[i] }
				if c.norms {
					qh, kh := be.View(pick(q), T*c.heads, c.hd), be.View(pick(k), T*c.kvh, c.hd)
					be.RMSNorm(qh, qh, []backend.Weight{qn.a, qn.b}[i], 1e-6)
					be.RMSNorm(kh, kh, []backend.Weight{kn.a, kn.b}[i], 1e-6)
				}
				be.ApplyRoPE(pick(q), c.heads, c.hd, rope)
				be.ApplyRoPE(pick(k), c.kvh, c.hd, rope)
				be.Attention(pick(out), pick(q), pick(k), pick(v), []backend.KVStore{kva, kvb}[i], 0, []backend.AttnParams{p, pb}[i])
			}
			e.check(fmt.Sprintf("AttentionBatchDecode/seqs%d/h%d/kv%d/d%d/win%d/cap%g/norms%v/sinks%v/step%d",
				c.seqs, c.heads, c.kvh, c.hd, c.window, c.softcap, c.norms, c.sinks, si), out, T)
		}
	}
}

func toInt32(x []int) []int32 {
	out := make([]int32, len(x))
	for i, v := range x {
		out[i] = int32(v)
	}
	return out
}
