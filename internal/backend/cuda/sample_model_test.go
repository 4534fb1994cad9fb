//go:build linux

package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// A line-by-line Go model of kernels/sample.cu's algorithm (radix
// descents, tie ranks by chunk scans, the chunked inverse CDF), run on
// the host against backend.HostSample. It checks the design on any
// machine; the GPU tests (sample_gpu_test.go) check the kernel itself.

const modelThreads = sampleThreads

func modelKey(v float32) uint32 {
	if v != v {
		v = float32(math.Inf(-1))
	}
	u := math.Float32bits(v)
	if u == 0x80000000 {
		u = 0
	}
	if u&0x80000000 != 0 {
		return ^u
	}
	return u | 0x80000000
}

func modelValue(k uint32) float32 {
	if k&0x80000000 != 0 {
		return math.Float32frombits(k & 0x7fffffff)
	}
	return math.Float32frombits(^k)
}

func modelWeight(v, m float32, invT float64) float32 {
	x := (float64(v) - float64(m)) * invT
	if x >= -87.3 {
		return float32(math.Exp(x))
	}
	return 0
}

func modelArgmax(x []float32) (int, float32) {
	best, idx := float32(math.Inf(-1)), -1
	for c, v := range x {
		if v > best || (v == best && idx < 0) {
			best, idx = v, c
		}
	}
	if idx < 0 {
		return 0, float32(math.Inf(-1))
	}
	return idx, best
}

// modelRadix is sample_radix.
func modelRadix(x []float32, mass bool, m float32, invT float64, strict bool, lo uint32, tieMass, target float64) (key uint32, above float64, fell bool) {
	prefix := uint32(0)
	for shift := 24; shift >= 0; shift -= 8 {
		hi := uint32(0)
		if shift != 24 {
			hi = 0xffffffff << (shift + 8)
		}
		// Fixed-point sums (SAMPLE_FIX), exact and order-independent: one
		// histogram for the block gives the per-warp ones' total.
		var wh [256]uint64
		for _, v := range x {
			k := modelKey(v)
			if k&hi != prefix || (strict && k <= lo) {
				continue
			}
			w := uint64(1)
			if mass {
				w = uint64(math.RoundToEven(float64(modelWeight(v, m, invT)) * (1 << 31)))
			}
			wh[(k>>shift)&255] += w
		}
		var dh [256]float64
		for b := range dh {
			dh[b] = float64(wh[b])
			if mass {
				dh[b] /= 1 << 31
			}
			if strict && lo&hi == prefix && int((lo>>shift)&255) == b {
				dh[b] += tieMass
			}
		}
		acc, pick, lowest := above, -1, -1
		for b := 255; b >= 0; b-- {
			h := dh[b]
			if !(h > 0) {
				continue
			}
			lowest = b
			if acc+h >= target {
				pick = b
				break
			}
			acc += h
		}
		if pick < 0 {
			pick = max(lowest, 0)
			if lowest >= 0 {
				acc -= dh[lowest]
			}
			fell = true
		}
		prefix |= uint32(pick) << shift
		above = acc
	}
	return prefix, above, fell
}

func modelChunk(cols, t int) (int, int) {
	C := (cols + modelThreads - 1) / modelThreads
	c0 := min(cols, t*C)
	return c0, min(cols, c0+C)
}

type modelFilter struct {
	m, minP    float32
	invT       float64
	hasK, hasP bool
	tk, tp     uint32
	rk, rp     int64
	nk, np     int64
}

func (f *modelFilter) weigh(v float32) float32 {
	k := modelKey(v)
	if f.hasK {
		if k < f.tk {
			return 0
		}
		if k == f.tk {
			f.nk++
			if f.nk-1 >= f.rk {
				return 0
			}
		}
	}
	if f.hasP {
		if k < f.tp {
			return 0
		}
		if k == f.tp {
			f.np++
			if f.np-1 >= f.rp {
				return 0
			}
		}
	}
	w := modelWeight(v, f.m, f.invT)
	if w >= f.minP {
		return w
	}
	return 0
}

// modelDraw is sample_draw on the parameter words P.
func modelDraw(x []float32, P []int32, m float32, u float64) int {
	fl := func(i int) float32 { return math.Float32frombits(uint32(P[i])) }
	f := modelFilter{m: m, invT: 1 / float64(fl(0)), minP: fl(3), hasK: P[1] > 0, hasP: fl(2) < 1, rk: math.MaxInt64, rp: math.MaxInt64}
	tieMass := 0.0
	cols := len(x)
	if f.hasK {
		var above float64
		f.tk, above, _ = modelRadix(x, false, m, f.invT, false, 0, 0, float64(P[1]))
		f.rk = int64(P[1]) - int64(above)
		tieMass = float64(f.rk) * float64(modelWeight(modelValue(f.tk), m, f.invT))
	}
	if f.hasP {
		z := 0.0
		for _, v := range x {
			if !f.hasK || modelKey(v) > f.tk {
				z += float64(modelWeight(v, m, f.invT))
			}
		}
		z += tieMass
		target := float64(fl(2)) * z
		var above float64
		var fell bool
		f.tp, above, fell = modelRadix(x, true, m, f.invT, f.hasK, f.tk, tieMass, target)
		wp := float64(modelWeight(modelValue(f.tp), m, f.invT))
		if !fell && wp > 0 {
			f.rp = int64(math.Ceil((target - above) / wp))
		}
	}
	nk0 := make([]int64, modelThreads)
	np0 := make([]int64, modelThreads)
	if f.hasK {
		var run int64
		for t := range modelThreads {
			nk0[t] = run
			c0, c1 := modelChunk(cols, t)
			for c := c0; c < c1; c++ {
				if modelKey(x[c]) == f.tk {
					run++
				}
			}
		}
	}
	if f.hasP {
		var run int64
		for t := range modelThreads {
			np0[t] = run
			c0, c1 := modelChunk(cols, t)
			nk := nk0[t]
			for c := c0; c < c1; c++ {
				k := modelKey(x[c])
				in := !f.hasK || k > f.tk
				if f.hasK && k == f.tk {
					in = nk < f.rk
					nk++
				}
				if in && k == f.tp {
					run++
				}
			}
		}
	}
	own := make([]float64, modelThreads)
	total := 0.0
	for t := range modelThreads {
		f.nk, f.np = nk0[t], np0[t]
		c0, c1 := modelChunk(cols, t)
		for c := c0; c < c1; c++ {
			own[t] += float64(f.weigh(x[c]))
		}
		total += own[t]
	}
	target := u * total
	ex, who, last := 0.0, -1, -1
	exs := make([]float64, modelThreads)
	for t := range modelThreads {
		exs[t] = ex
		if own[t] > 0 {
			if who < 0 && ex+own[t] > target {
				who = t
			}
			last = t
		}
		ex += own[t]
	}
	if who < 0 {
		who = last
	}
	if who < 0 {
		return -1
	}
	f.nk, f.np = nk0[who], np0[who]
	c0, c1 := modelChunk(cols, who)
	acc, id, lastC := exs[who], -1, c0
	for c := c0; c < c1; c++ {
		if w := f.weigh(x[c]); w > 0 {
			acc += float64(w)
			lastC = c
			if acc > target {
				id = c
				break
			}
		}
	}
	if id < 0 {
		return lastC
	}
	return id
}

// modelSample is sample_rows for one row, without logprobs.
func modelSample(raw []float32, r backend.SampleRow) int32 {
	words, _ := sampleWords([]backend.SampleRow{r}, len(raw))
	P, H := words[:sampleParamWords], words[sampleParamWords:]
	for _, v := range raw {
		if !(v <= math.MaxFloat32) {
			return backend.NonFiniteRow
		}
	}
	x := append([]float32(nil), raw...)
	if P[14]&sampleMasked != 0 {
		M := words[P[15]:]
		for c := range x {
			if (uint32(M[c>>5])>>(c&31))&1 == 0 {
				x[c] = float32(math.Inf(-1))
			}
		}
	}
	rep, pres, freq := math.Float32frombits(uint32(P[4])), math.Float32frombits(uint32(P[5])), math.Float32frombits(uint32(P[6]))
	if P[14]&samplePenalised != 0 {
		for i := 0; i < int(P[13]); i++ {
			id, cnt := H[3*i], H[3*i+1]
			if uint32(id) >= uint32(len(x)) {
				continue
			}
			v := x[id]
			if rep != 1 {
				if v > 0 {
					v /= rep
				} else {
					v *= rep
				}
			}
			if cnt > 0 {
				v = float32(v - float32(freq*float32(cnt)))
				v -= pres
			}
			x[id] = v
		}
	}
	id, m := modelArgmax(x)
	if P[14]&sampleGreedy == 0 && !math.IsInf(float64(m), 0) {
		if d := modelDraw(x, P, m, sample.Uniform(r.Seed, r.Counter)); d >= 0 {
			id = d
		}
	}
	return int32(id)
}

// TestSampleModelMatchesHost runs the model of the kernel against
// backend.HostSample on random rows: greedy and top-k 1 exactly, sampled
// rows up to rounding at a boundary (at most 0.5% of draws).
func TestSampleModelMatchesHost(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cases := []backend.SampleRow{
		{Temperature: 0, RepetitionPenalty: 1.3, PresencePenalty: 0.5, FrequencyPenalty: 0.7},
		{Temperature: 1},
		{Temperature: 0.7, TopK: 1},
		{Temperature: 1, TopK: 5},
		{Temperature: 0.8, TopK: 40, TopP: 0.9},
		{Temperature: 1, TopP: 0.8},
		{Temperature: 0.6, TopP: 0.3},
		{Temperature: 1.3, MinP: 0.1},
		{Temperature: 0.9, TopK: 12, TopP: 0.95, MinP: 0.05, RepetitionPenalty: 1.2, FrequencyPenalty: 0.4},
		{Temperature: 1.5, TopP: 0.6, RepetitionPenalty: 0.8, PresencePenalty: -0.5},
		{Temperature: 1, TopK: 3000, TopP: 0.5},
	}
	for _, vocab := range []int{1, 2, 37, 1500, 5001} {
		for ci, c := range cases {
			draws := 300
			if vocab > 2000 {
				draws = 40
			}
			loose, missed := 0, 0
			for d := range draws {
				x := make([]float32, vocab)
				for i := range x {
					x[i] = float32(r.NormFloat64() * 2.5)
				}
				if d%3 == 1 { // ties
					for i := range x {
						x[i] = float32(math.Round(float64(x[i]) * 2))
					}
				}
				if d%5 == 2 { // masks
					for i := range x {
						if i%4 != 0 {
							x[i] = float32(math.Inf(-1))
						}
					}
				}
				c.Seed, c.Counter = r.Uint64(), uint64(d)
				c.History = nil
				for range r.IntN(20) {
					c.History = append(c.History, backend.TokenCount{ID: int32(r.IntN(vocab)), Output: int32(r.IntN(3))})
				}
				c.History = dedup(c.History)
				c.Allowed = nil
				if d%7 == 3 { // a constraint's mask: a random third, or one token
					c.Allowed = make([]uint64, (vocab+63)/64)
					for i := range vocab {
						if r.IntN(3) == 0 || (d%14 == 3 && i == vocab/2) {
							c.Allowed[i/64] |= 1 << (i % 64)
						}
					}
					if d%14 == 3 {
						clear(c.Allowed)
						c.Allowed[vocab/2/64] = 1 << (vocab / 2 % 64)
					}
				}
				want := backend.HostSample(x, c).ID
				got := modelSample(x, c)
				if !(c.Temperature >= 1e-5) || c.TopK == 1 {
					if got != want {
						t.Fatalf("vocab %d case %d draw %d: model %d, host %d", vocab, ci, d, got, want)
					}
					continue
				}
				loose++
				if got != want {
					missed++
				}
			}
			if missed*200 > loose {
				t.Errorf("vocab %d case %d %+v: %d of %d draws differ", vocab, ci, c, missed, loose)
			}
		}
	}
}

func dedup(h []backend.TokenCount) []backend.TokenCount {
	seen := map[int32]bool{}
	out := h[:0]
	for _, x := range h {
		if !seen[x.ID] {
			seen[x.ID] = true
			out = append(out, x)
		}
	}
	return out
}
