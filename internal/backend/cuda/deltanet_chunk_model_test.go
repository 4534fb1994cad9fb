//go:build linux

package cuda

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// dncModel is a host model of kernels/deltanet_chunk.cu in f32: the same
// chunking, padding, shared-memory layouts and strides (q/k rows
// dnc_kp+4 apart, 64x64 matrices DNC_LD apart, 32-column state tiles),
// the same products in the same order, so an indexing or padding slip in
// the algorithm shows here against the CPU backend without a GPU. The
// conv and the gates it consumes follow deltanet_conv and dn_gate.
type dncModel struct {
	p     backend.DeltaNetParams
	w     []float32 // conv [C][K]
	alog  []float32
	dtb   []float32
	state [][]float32 // per slot: [K-1][C] window then VHeads [KD][VD]
}

const dncLD = 68 // DNC_LD

func dncKP(kd int) int { return (kd + 63) / 64 * 64 }

// stageQK is dn_stage_qk for nrows rows of width w, ld apart, writing the
// rows' norm factors to inv (q's at t*istride, k's after it) unless nil.
func (m *dncModel) stageQK(sq, sk []float32, ld, w int, xs []float32, row0, L, nrows, kh int, inv []float32, istride int) {
	p := m.p
	C, KD := p.Channels(), p.KDim
	qscale := float32(1 / math.Sqrt(float64(KD)))
	for e := range 2 * nrows {
		t, isk := e>>1, e&1
		d := sq[t*ld:]
		if isk == 1 {
			d = sk[t*ld:]
		}
		if t >= L {
			clear(d[:w])
			continue
		}
		off := (row0+t)*C + kh*KD
		if isk == 1 {
			off += p.KHeads * KD
		}
		src := xs[off : off+KD]
		var ss float32
		for _, v := range src {
			ss += v * v
		}
		f := 1 / float32(math.Sqrt(float64(ss+1e-6)))
		if isk == 0 {
			f *= qscale
		}
		for i := range w {
			d[i] = 0
			if i < KD {
				d[i] = src[i] * f
			}
		}
		if inv != nil {
			inv[t*istride+isk] = f
		}
	}
}

func (m *dncModel) gate(a, b []float32, r, h int) (g, beta float32) {
	vh := m.p.VHeads
	x := float64(a[r*vh+h] + m.dtb[h])
	sp := x
	if x <= 20 {
		sp = math.Log1p(math.Exp(x))
	}
	beta = float32(1 / (1 + math.Exp(-float64(b[r*vh+h]))))
	return float32(-math.Exp(float64(m.alog[h])) * sp), beta
}

// mm is dn_mm over a whole 64x32 tile: out(m, n) += sum_k A(m, k) B(k, n).
func mm(out []float32, ldo int, a []float32, am, ak int, b []float32, bk, bn, K int) {
	for mi := range 64 {
		for n := range 32 {
			acc := out[mi*ldo+n]
			for k := range K {
				acc += a[mi*am+k*ak] * b[k*bk+n*bn]
			}
			out[mi*ldo+n] = acc
		}
	}
}

// prep is deltanet_chunk_prep for the chunk of L rows at r0 and head h.
func (m *dncModel) prep(tb, pm, cum, invn, xs, a, b []float32, r0, L, h int) {
	p := m.p
	vh, kd := p.VHeads, p.KDim
	ldk := dncKP(kd) + 4
	kh := h / (vh / p.KHeads)
	sq, sk := make([]float32, 64*ldk), make([]float32, 64*ldk)
	sa, st := make([]float32, 64*dncLD), make([]float32, 64*dncLD)
	sc, sb := make([]float32, 64), make([]float32, 64)
	var inv []float32
	if h%(vh/p.KHeads) == 0 {
		inv = invn[(r0*p.KHeads+kh)*2:]
	}
	m.stageQK(sq, sk, ldk, ldk, xs, r0, L, 64, kh, inv, 2*p.KHeads)
	for t := range L {
		sc[t], sb[t] = m.gate(a, b, r0+t, h)
	}
	var acc float32
	for t := range 64 {
		acc += sc[t]
		sc[t] = acc
	}
	for t := range L {
		cum[(r0+t)*vh+h] = sc[t]
	}
	for n0 := 0; n0 < 64; n0 += 32 {
		kk, qk := make([]float32, 64*32), make([]float32, 64*32)
		mm(kk, 32, sk, ldk, 1, sk[n0*ldk:], 1, ldk, kd)
		mm(qk, 32, sq, ldk, 1, sk[n0*ldk:], 1, ldk, kd)
		for i := range 64 {
			for j := range 32 {
				n := n0 + j
				var d float32
				if n <= i {
					d = float32(math.Exp(float64(sc[i] - sc[n])))
				}
				sa[i*dncLD+n] = 0
				if n < i {
					sa[i*dncLD+n] = sb[i] * kk[i*32+j] * d
				}
				if i < L {
					pm[((r0+i)*vh+h)*64+n] = qk[i*32+j] * d
				}
			}
		}
	}
	for c := range 64 {
		for i := range 64 {
			x := float32(0)
			if i == c {
				x = 1
			}
			if i > c {
				var s float32
				for u := c; u < i; u++ {
					s += sa[i*dncLD+u] * st[u*dncLD+c]
				}
				x = -s
			}
			st[i*dncLD+c] = x
		}
	}
	for i := range L {
		for c := range 64 {
			tb[((r0+i)*vh+h)*64+c] = st[i*dncLD+c] * sb[c]
		}
	}
}

// scan is deltanet_chunk_scan's block for value columns j0.. of head h
// over the sequence (start, n) whose state is S [KD][VD].
func (m *dncModel) scan(out, xs, tb, pm, cum, invn, S []float32, start, n, h, j0 int) {
	p := m.p
	vh, kd, vd := p.VHeads, p.KDim, p.VDim
	C, kp := p.Channels(), dncKP(kd)
	ldk, kh := kp+4, h/(vh/p.KHeads)
	sq, sk := make([]float32, 64*ldk), make([]float32, 64*ldk)
	sS, sR, sV, sVd := make([]float32, kp*32), make([]float32, 64*32), make([]float32, 64*32), make([]float32, 64*32)
	sT, sP := make([]float32, 64*dncLD), make([]float32, 64*dncLD)
	fq, fk, fd := make([]float32, 64), make([]float32, 64), make([]float32, 64)
	for i := range kd {
		for j := range 32 {
			if j0+j < vd {
				sS[i*32+j] = S[i*vd+j0+j]
			}
		}
	}
	for c0 := 0; c0 < n; c0 += 64 {
		L, r0 := min(64, n-c0), start+c0
		// q and k raw, zero past KDim and L (the cp.async copies).
		clear(sq)
		clear(sk)
		for t := range L {
			for i := range kd {
				g := (r0+t)*C + kh*kd + i
				sq[t*ldk+i], sk[t*ldk+i] = xs[g], xs[g+p.KHeads*kd]
			}
		}
		clear(sR)
		clear(sT)
		clear(sP)
		for t := range L {
			for j := range 32 {
				if j0+j < vd {
					sR[t*32+j] = xs[(r0+t)*C+2*p.KHeads*kd+h*vd+j0+j]
				}
			}
			for u := range 64 {
				g := ((r0+t)*vh+h)*64 + u
				sT[t*dncLD+u], sP[t*dncLD+u] = tb[g], pm[g]
			}
		}
		cL := cum[(r0+L-1)*vh+h]
		for t := range 64 {
			fq[t], fk[t], fd[t] = 0, 0, 0
			if t < L {
				r := r0 + t
				c := cum[r*vh+h]
				q, k := invn[(r*p.KHeads+kh)*2], invn[(r*p.KHeads+kh)*2+1]
				e, d := float32(math.Exp(float64(c))), float32(math.Exp(float64(cL-c)))
				fq[t], fk[t], fd[t] = e*q, e*k, d*k
			}
		}
		ks, qs := make([]float32, 64*32), make([]float32, 64*32)
		mm(ks, 32, sk, ldk, 1, sS, 32, 1, kd)
		mm(qs, 32, sq, ldk, 1, sS, 32, 1, kd)
		o := make([]float32, 64*32)
		for t := range 64 {
			for j := range 32 {
				sR[t*32+j] -= fk[t] * ks[t*32+j]
				o[t*32+j] = qs[t*32+j] * fq[t]
			}
		}
		clear(sV)
		mm(sV, 32, sT, dncLD, 1, sR, 32, 1, 64)
		for t := range 64 {
			for j := range 32 {
				sVd[t*32+j] = sV[t*32+j] * fd[t]
			}
		}
		pv := make([]float32, 64*32)
		mm(pv, 32, sP, dncLD, 1, sV, 32, 1, 64)
		for t := range L {
			for j := range 32 {
				if j0+j < vd {
					out[(r0+t)*vh*vd+h*vd+j0+j] = o[t*32+j] + pv[t*32+j]
				}
			}
		}
		eL := float32(math.Exp(float64(cL)))
		for i0 := 0; i0 < kp; i0 += 64 {
			upd := make([]float32, 64*32)
			mm(upd, 32, sk[i0:], 1, ldk, sVd, 32, 1, 64)
			for i := range 64 {
				for j := range 32 {
					sS[(i0+i)*32+j] = eL*sS[(i0+i)*32+j] + upd[i*32+j]
				}
			}
		}
	}
	for i := range kd {
		for j := range 32 {
			if j0+j < vd {
				S[i*vd+j0+j] = sS[i*32+j]
			}
		}
	}
}

// step runs one GatedDeltaNet call through the model: the conv (and its
// window), then every sequence in the chunked form, as if cmin were 1.
func (m *dncModel) step(out, qkv, a, b []float32, batch *backend.Batch) {
	p := m.p
	C, K, vh := p.Channels(), p.ConvKernel, p.VHeads
	xs := make([]float32, len(qkv))
	T := len(batch.Positions)
	tb, pm, cum := make([]float32, T*vh*64), make([]float32, T*vh*64), make([]float32, T*vh)
	invn := make([]float32, T*p.KHeads*2)
	for _, s := range batch.Seqs {
		st := m.state[s.Slot]
		if batch.Positions[s.Start] == 0 {
			clear(st)
		}
		win := st[:(K-1)*C]
		for c := range C {
			in := func(u int) float32 { // u: sequence-relative input row
				if u >= 0 {
					return qkv[(s.Start+u)*C+c]
				}
				return win[(u+K-1)*C+c]
			}
			for t := range s.Len {
				var acc float32
				for j := range K {
					acc += m.w[c*K+j] * in(t-K+1+j)
				}
				xs[(s.Start+t)*C+c] = acc / (1 + float32(math.Exp(float64(-acc))))
			}
			nw := make([]float32, K-1)
			for r := range K - 1 {
				nw[r] = in(s.Len - (K - 1) + r)
			}
			for r := range K - 1 {
				win[r*C+c] = nw[r]
			}
		}
		for c0 := 0; c0 < s.Len; c0 += 64 {
			for h := range vh {
				m.prep(tb, pm, cum, invn, xs, a, b, s.Start+c0, min(64, s.Len-c0), h)
			}
		}
		for h := range vh {
			S := st[(K-1)*C+h*p.KDim*p.VDim : (K-1)*C+(h+1)*p.KDim*p.VDim]
			for j0 := 0; j0 < p.VDim; j0 += 32 {
				m.scan(out, xs, tb, pm, cum, invn, S, s.Start, s.Len, h, j0)
			}
		}
	}
}

// TestDeltaChunkModel runs the host model of the chunked kernels against
// the CPU backend over steps of ragged sequences of 1 to 300 positions
// (chunks of 1, 63, 64, 65 and several with a short last one),
// continuations that read the state and conv window earlier steps left,
// and a restart at position 0, for shapes with key dims of 128, 200 and
// 24 (padding to 64) and value dims that do not fill 32 columns.
func TestDeltaChunkModel(t *testing.T) {
	for _, p := range []backend.DeltaNetParams{
		{KHeads: 2, VHeads: 4, KDim: 128, VDim: 128, ConvKernel: 4, ChunkSize: 64},
		{KHeads: 1, VHeads: 3, KDim: 24, VDim: 40, ConvKernel: 3, ChunkSize: 64},
		{KHeads: 1, VHeads: 1, KDim: 200, VDim: 20, ConvKernel: 2, ChunkSize: 64},
	} {
		t.Run(fmt.Sprintf("k%dx%d_v%dx%d", p.KHeads, p.KDim, p.VHeads, p.VDim), func(t *testing.T) {
			testDeltaChunkModel(t, p)
		})
	}
}

func testDeltaChunkModel(t *testing.T, p backend.DeltaNetParams) {
	ref, err := backend.New("cpu", backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	rng := rand.New(rand.NewSource(11))
	randn := func(n int, s float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * s)
		}
		return x
	}
	C, K, hv := p.Channels(), p.ConvKernel, p.VHeads
	m := &dncModel{p: p, w: randn(C*K, 0.5), alog: randn(hv, 0.5), dtb: randn(hv, 0.5)}
	const slots = 3
	for range slots {
		m.state = append(m.state, make([]float32, p.StateFloats()))
	}
	up := func(x []float32, shape ...int) backend.Weight {
		w, err := ref.UploadWeight(&tensor.Host{Name: "w", Shape: shape, DType: tensor.F32, Data: f32le(x)})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := backend.DeltaNetWeights{Conv: up(m.w, C, 1, K), ALog: up(m.alog, hv), DtBias: up(m.dtb, hv)}
	kv, err := ref.NewKVStore(backend.KVSpec{NumBlocks: 1, BlockSize: 16, Slots: slots, Layers: []backend.KVLayer{{DeltaNet: p}}})
	if err != nil {
		t.Fatal(err)
	}
	lens := make([]int, slots)
	for si, plan := range [][]int{{300, 1, 33}, {63, 64, 65}, {1, 130, 2}, {-31, 0, 128}, {2, 1, 1}} {
		batch := &backend.Batch{}
		for s, n := range plan {
			if n < 0 { // a restart at position 0
				n, lens[s] = -n, 0
			}
			if n == 0 {
				continue
			}
			batch.Seqs = append(batch.Seqs, backend.SeqSlice{Start: len(batch.Positions), Len: n, Blocks: []int32{0}, Slot: s})
			for i := range n {
				batch.Tokens = append(batch.Tokens, 0)
				batch.Positions = append(batch.Positions, int32(lens[s]+i))
			}
			lens[s] += n
		}
		T := len(batch.Positions)
		qkv, a, b := randn(T*C, 1), randn(T*hv, 1), randn(T*hv, 1)
		got := make([]float32, T*hv*p.VDim)
		m.step(got, qkv, a, b, batch)
		if err := ref.BeginStep(batch); err != nil {
			t.Fatal(err)
		}
		tin, ta, tbt, tout := ref.NewTensor(T, C), ref.NewTensor(T, hv), ref.NewTensor(T, hv), ref.NewTensor(T, hv*p.VDim)
		cpu.WriteRows(tin, qkv)
		cpu.WriteRows(ta, a)
		cpu.WriteRows(tbt, b)
		ref.(backend.DeltaNetBackend).GatedDeltaNet(tout, tin, ta, tbt, w, kv, 0, p)
		want := make([]float32, len(got))
		ref.ReadRows(tout, want)
		var num, den float64
		for i := range got {
			d := float64(got[i] - want[i])
			num += d * d
			den += float64(want[i]) * float64(want[i])
		}
		rel := math.Sqrt(num / den)
		if rel > 2e-6 || math.IsNaN(rel) {
			t.Errorf("step %d %v: normalised error %.3g against the CPU backend", si, plan, rel)
		} else {
			t.Logf("step %d %v: normalised error %.3g", si, plan, rel)
		}
	}
}
