package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// TestTiledAttentionMatchesRef runs the same steps through the tiled
// kernels and the plain loop (attentionRef) on two stores: prefill chunks
// and decode tokens of several sequences with shuffled block tables,
// GQA/MQA/MHA, windows, softcap, contexts longer than one key chunk. The
// kernels sum in another order, so the bound is relative to the output's
// scale: float32 rounding, ~1e-6. Attention sinks are folded in at
// different places (the plain loop's softmax, the kernels' final
// denominator). Each store dtype: the kernels read the decoded chunks
// that the plain loop decodes row by row.
func TestTiledAttentionMatchesRef(t *testing.T) {
	if !useAsm {
		t.Skip("no assembly kernels")
	}
	for _, dt := range []backend.KVDtype{backend.KVF32, backend.KVBF16, backend.KVFP8} {
		testTiledAttentionMatchesRef(t, dt)
	}
}

func testTiledAttentionMatchesRef(t *testing.T, dt backend.KVDtype) {
	for _, c := range []struct {
		p      backend.AttnParams
		chunks []int // tokens per step for each of the sequences
		bs     int
	}{
		{backend.AttnParams{Heads: 14, KVHeads: 2, HeadDim: 64, Scale: 0.125}, []int{300, 1, 1, 230, 1}, 16},
		{backend.AttnParams{Heads: 4, KVHeads: 4, HeadDim: 8, Scale: 0.3}, []int{5, 1, 17, 1}, 4},
		{backend.AttnParams{Heads: 8, KVHeads: 1, HeadDim: 128, Scale: 0.09}, []int{3, 600, 1}, 16},
		{backend.AttnParams{Heads: 6, KVHeads: 2, HeadDim: 16, Scale: 0.25, Window: 37}, []int{50, 1, 300, 1}, 8},
		{backend.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 32, Scale: 0.2, Softcap: 2}, []int{40, 1, 9}, 16},
		{backend.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 32, Scale: 0.2, Window: 5, Softcap: 3}, []int{12, 1, 12, 1}, 5},
		// gpt-oss: attention sinks (one large enough to dominate) with a window.
		{backend.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 16, Scale: 0.25, Window: 8,
			Sinks: &weight{shape: []int{4}, dense: []float32{0.5, -1, 2, 6}}}, []int{20, 1, 9, 1}, 4},
	} {
		t.Run(fmt.Sprintf("%s-h%d-kv%d-d%d-w%d-cap%g", dt, c.p.Heads, c.p.KVHeads, c.p.HeadDim, c.p.Window, c.p.Softcap), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(c.p.HeadDim)))
			be := New(2)
			total := 0
			for _, n := range c.chunks {
				total += n
			}
			const seqs = 3
			nb := seqs * (total/c.bs + 2)
			spec := backend.KVSpec{NumBlocks: nb, BlockSize: c.bs,
				Layers: []backend.KVLayer{{KVHeads: c.p.KVHeads, HeadDim: c.p.HeadDim, Window: c.p.Window}}, Dtype: dt}
			kvA, _ := be.NewKVStore(spec)
			kvB, _ := be.NewKVStore(spec)
			perm := rng.Perm(nb)
			var tables [seqs][]int32
			for s := range seqs {
				for i := range nb / seqs {
					tables[s] = append(tables[s], int32(perm[s*(nb/seqs)+i]))
				}
			}
			var done [seqs]int
			worst := 0.0
			for si, n := range c.chunks {
				b := &backend.Batch{}
				// Sequence s takes chunk si+s (mod), so steps mix prefill
				// and decode rows of different lengths.
				for s := range seqs {
					m := c.chunks[(si+s)%len(c.chunks)]
					if s > 0 && m > 64 {
						m = 1 + m%7
					}
					if s == 0 {
						m = n
					}
					b.Seqs = append(b.Seqs, backend.SeqSlice{Start: len(b.Tokens), Len: m, Blocks: tables[s]})
					for i := range m {
						b.Tokens = append(b.Tokens, 0)
						b.Positions = append(b.Positions, int32(done[s]+i))
					}
					done[s] += m
				}
				if err := be.BeginStep(b); err != nil {
					t.Fatal(err)
				}
				T := len(b.Tokens)
				q := randTensor(be, rng, T, c.p.Heads*c.p.HeadDim)
				k := randTensor(be, rng, T, c.p.KVHeads*c.p.HeadDim)
				v := randTensor(be, rng, T, c.p.KVHeads*c.p.HeadDim)
				// Larger queries make peaked softmaxes, which a wrong max
				// or mask would show.
				for i := range q.d {
					q.d[i] *= 3
				}
				got := be.NewTensor(T, c.p.Heads*c.p.HeadDim).(*Tensor)
				want := be.NewTensor(T, c.p.Heads*c.p.HeadDim).(*Tensor)
				be.Attention(got, q, k, v, kvA, 0, c.p)
				useAsm = false
				be.Attention(want, q, k, v, kvB, 0, c.p)
				useAsm = true
				for i, x := range want.d {
					d := math.Abs(float64(got.d[i] - x))
					worst = max(worst, d)
					if d > 2e-5 || math.IsNaN(float64(got.d[i])) {
						t.Fatalf("step %d: element %d (row %d) is %g, want %g", si, i, i/got.cols, got.d[i], x)
					}
				}
			}
			t.Logf("max abs difference %.2g", worst)
		})
	}
}

// TestTiledAttentionBatchInvariant: a token's output must be bit-identical
// whichever tokens share its step (the engine's prefix cache and batching
// tests rely on it): a 45-token chunk, then the same positions split
// into steps of 1, 7 and 37 tokens, with a window so items start at
// different keys.
func TestTiledAttentionBatchInvariant(t *testing.T) {
	for _, c := range []struct {
		window int
		dt     backend.KVDtype
	}{{0, backend.KVF32}, {300, backend.KVF32}, {300, backend.KVFP8}} {
		window := c.window
		p := backend.AttnParams{Heads: 14, KVHeads: 2, HeadDim: 64, Scale: 0.125, Window: window}
		rng := rand.New(rand.NewPCG(3, 4))
		be := New(2)
		const pre, n = 600, 45
		spec := backend.KVSpec{NumBlocks: 64, BlockSize: 16, Layers: []backend.KVLayer{{KVHeads: 2, HeadDim: 64, Window: window}}, Dtype: c.dt}
		blocks := make([]int32, 64)
		for i := range blocks {
			blocks[i] = int32(i)
		}
		qAll := randTensor(be, rng, pre+n, p.Heads*p.HeadDim)
		kAll := randTensor(be, rng, pre+n, p.KVHeads*p.HeadDim)
		vAll := randTensor(be, rng, pre+n, p.KVHeads*p.HeadDim)
		run := func(splits []int) []float32 {
			kv, _ := be.NewKVStore(spec)
			out := make([]float32, 0, n*p.Heads*p.HeadDim)
			pos := 0
			for _, m := range append([]int{pre}, splits...) {
				b := &backend.Batch{Seqs: []backend.SeqSlice{{Len: m, Blocks: blocks}}}
				for i := range m {
					b.Tokens = append(b.Tokens, 0)
					b.Positions = append(b.Positions, int32(pos+i))
				}
				if err := be.BeginStep(b); err != nil {
					t.Fatal(err)
				}
				dst := be.NewTensor(m, p.Heads*p.HeadDim).(*Tensor)
				be.Attention(dst, be.Slice(qAll, pos, pos+m), be.Slice(kAll, pos, pos+m), be.Slice(vAll, pos, pos+m), kv, 0, p)
				if pos >= pre {
					out = append(out, dst.d...)
				}
				pos += m
			}
			return out
		}
		want := run([]int{n})
		got := run([]int{1, 7, 37})
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("window %d: element %d is %g in small steps, %g in one chunk", window, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkDecodeAttention: one decode token of Qwen2.5-0.5B's attention
// (14 heads, 2 KV heads, dim 64) over ctx keys, with the KV store hot in
// cache; per token the model runs 24 of these. Each KV dtype: the cost of
// decoding bf16 and fp8 chunks against reading float32.
func BenchmarkDecodeAttention(b *testing.B) {
	for _, c := range []struct {
		ctx int
		dt  backend.KVDtype
	}{{512, backend.KVF32}, {2048, backend.KVF32}, {2048, backend.KVBF16}, {2048, backend.KVFP8}} {
		ctx := c.ctx
		b.Run(fmt.Sprintf("%d-%s", ctx, c.dt), func(b *testing.B) {
			p := backend.AttnParams{Heads: 14, KVHeads: 2, HeadDim: 64, Scale: 0.125}
			be := New(0)
			rng := rand.New(rand.NewPCG(1, 1))
			nb := (ctx + 16) / 16
			kv, _ := be.NewKVStore(backend.KVSpec{NumBlocks: nb, BlockSize: 16, Layers: []backend.KVLayer{{KVHeads: 2, HeadDim: 64}}, Dtype: c.dt})
			blocks := make([]int32, nb)
			for i := range blocks {
				blocks[i] = int32(i)
			}
			st := kv.(*kvStore)
			for i := range st.k[0].len() {
				st.k[0].put(i, []float32{float32(rng.NormFloat64())})
				st.v[0].put(i, []float32{float32(rng.NormFloat64())})
			}
			bt := &backend.Batch{Tokens: []int32{0}, Positions: []int32{int32(ctx)}, Seqs: []backend.SeqSlice{{Len: 1, Blocks: blocks}}}
			if err := be.BeginStep(bt); err != nil {
				b.Fatal(err)
			}
			q := randTensor(be, rng, 1, 14*64)
			k := randTensor(be, rng, 1, 128)
			v := randTensor(be, rng, 1, 128)
			out := be.NewTensor(1, 14*64)
			// cold: the KV store evicted from the caches first, as in a
			// decode step, where 277 MB of weights stream between two
			// visits of a layer.
			for _, cold := range []bool{false, true} {
				b.Run(map[bool]string{false: "hot", true: "cold"}[cold], func(b *testing.B) {
					var junk []byte
					if cold {
						junk = make([]byte, 64<<20)
					}
					for b.Loop() {
						if cold {
							b.StopTimer()
							for i := 0; i < len(junk); i += 64 {
								junk[i]++
							}
							b.StartTimer()
						}
						be.Attention(out, q, k, v, kv, 0, p)
					}
				})
			}
		})
	}
}

// BenchmarkAttnKernels: the bare kernels on one L1/L2-resident chunk of
// 256 keys of dim 64, in lane multiply-adds per nanosecond (one core's
// FMA peak here is about 54).
func BenchmarkAttnKernels(b *testing.B) {
	if !useAsm {
		b.Skip("no assembly kernels")
	}
	const n, hd = 256, 64
	v := make([]float32, n*128+64)
	offs := make([]int32, n+32)
	for i := range n {
		offs[i] = int32(i * 128)
	}
	ot, qt, f := make([]float32, hd*8), make([]float32, hd*8), make([]float32, 8)
	pt, st := make([]float32, n*8), make([]float32, n*8)
	for _, k := range []struct {
		name string
		f    func()
	}{
		{"scores", func() { attnScores(&qt[0], hd, &v[0], &offs[0], n, &st[0], &v[0]) }},
		{"pv", func() { attnPV(&ot[0], hd, &v[0], &offs[0], n, &pt[0], &f[0]) }},
		{"pvrows", func() { attnPVRows(&ot[0], hd, &v[0], &offs[0], n, &pt[0], &f[0]) }},
	} {
		b.Run(k.name, func(b *testing.B) {
			for b.Loop() {
				k.f()
			}
			b.ReportMetric(float64(n*hd*8)*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "MAC/ns")
		})
	}
}
