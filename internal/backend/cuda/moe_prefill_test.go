//go:build linux

package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// TestMoEPrefill runs MoE steps with many tokens (the grouped expert GEMM
// of ops_moe.go) and, around its threshold and for widths it does not
// take, the per-token path, against the CPU backend on the same weights.
// Each case states which path it expects and the recorded launches are
// checked for it. The output is poisoned with NaN first: an unwritten
// element fails. Bounds: 1e-2 normalised error overall (f16 activations
// on the tensor cores), 5e-2 per token row (one token with a missing or
// misplaced expert row shows there even when the total passes).
func TestMoEPrefill(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	ref, err := backend.New("cpu", backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	f16 := tensor.F16
	for i, c := range []struct {
		T, E, topk, hidden, inter int
		bits, group               int
		sdt                       tensor.DType
		act                       backend.Activation
		renorm                    bool
		grouped                   bool // the path the case must take
	}{
		{200, 16, 4, 256, 128, 4, 64, tensor.BF16, backend.SiLU, true, true},  // Qwen3-MoE-like
		{600, 8, 2, 512, 256, 4, 64, tensor.BF16, backend.SiLU, true, true},   // full tiles
		{33, 64, 8, 256, 256, 4, 128, f16, backend.GELUTanh, false, true},     // sparse tiles, f32 scales
		{7, 16, 4, 256, 128, 4, 64, tensor.BF16, backend.SiLU, true, false},   // below plan.MoEGEMMFrom's 8
		{8, 16, 4, 256, 128, 4, 64, tensor.BF16, backend.SiLU, true, true},    // from it
		{23, 128, 8, 256, 128, 4, 64, tensor.BF16, backend.SiLU, true, false}, // Qwen3's 128 experts, top 8: from 24
		{24, 128, 8, 256, 128, 4, 64, tensor.BF16, backend.SiLU, true, true},
		{64, 16, 4, 256, 128, 8, 64, tensor.BF16, backend.SiLU, true, false}, // 8 bits: per-token path
		{64, 16, 4, 256, 128, 4, 32, tensor.BF16, backend.SiLU, true, false}, // group 32: per-token path
	} {
		name := fmt.Sprintf("T%d_E%d_top%d_%dx%d_q%dg%d_%s_%v", c.T, c.E, c.topk, c.hidden, c.inter, c.bits, c.group, c.sdt, c.act)
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(7 + i)))
			randn := func(n int, s float64) []float32 {
				x := make([]float32, n)
				for j := range x {
					x[j] = float32(rng.NormFloat64() * s)
				}
				return x
			}
			hosts := []*tensor.Host{
				bf16Host("router", []int{c.E, c.hidden}, randn(c.E*c.hidden, 0.2)),
				qHost(t, "gate", []int{c.E, c.inter, c.hidden}, randn(c.E*c.inter*c.hidden, 0.1), c.bits, c.group, c.sdt),
				qHost(t, "up", []int{c.E, c.inter, c.hidden}, randn(c.E*c.inter*c.hidden, 0.1), c.bits, c.group, c.sdt),
				qHost(t, "down", []int{c.E, c.hidden, c.inter}, randn(c.E*c.hidden*c.inter, 0.1), c.bits, c.group, c.sdt),
				{Name: "x", Shape: []int{c.T, c.hidden}, DType: tensor.F32, Data: f32le(randn(c.T*c.hidden, 1))},
			}
			p := backend.MoEParams{TopK: c.topk, Renorm: c.renorm, Act: c.act}
			batch := &backend.Batch{Tokens: make([]int32, c.T), Positions: make([]int32, c.T),
				Seqs: []backend.SeqSlice{{Start: 0, Len: c.T, Blocks: []int32{0}}}}
			for j := range c.T {
				batch.Tokens[j], batch.Positions[j] = int32(j), int32(j)
			}
			outs := make([][]float32, 2)
			for k, be := range []backend.Backend{b, ref} {
				ws := make([]backend.Weight, len(hosts))
				for j, h := range hosts {
					if ws[j], err = be.UploadWeight(h); err != nil {
						t.Fatalf("%s: upload %s: %v", be.Name(), h.Name, err)
					}
				}
				if err := be.BeginStep(batch); err != nil {
					t.Fatalf("%s: BeginStep: %v", be.Name(), err)
				}
				x, out := be.NewTensor(c.T, c.hidden), be.NewTensor(c.T, c.hidden)
				be.Embed(x, ws[4]) // tokens 0..T-1: the rows of x
				if k == 0 {
					b.mu.Lock()
					b.fill(b.tt(out).ptr, float32(math.NaN()), c.T*c.hidden)
					b.mu.Unlock()
				}
				be.MoE(out, x, ws[0], backend.Experts{Gate: ws[1], Up: ws[2], Down: ws[3]}, p)
				if k == 0 {
					b.mu.Lock()
					took := false
					for _, l := range b.rec.ls {
						took = took || l.fn == b.fn("moe_align")
					}
					b.mu.Unlock()
					if took != c.grouped {
						t.Fatalf("grouped path taken: %v, want %v", took, c.grouped)
					}
				}
				outs[k] = make([]float32, c.T*c.hidden)
				be.ReadRows(out, outs[k])
				if err := be.Sync(); err != nil {
					t.Fatalf("%s: %v", be.Name(), err)
				}
			}
			got, want := outs[0], outs[1]
			var num, den, worst float64
			worstRow := -1
			for r := range c.T {
				var rn, rd float64
				for j := r * c.hidden; j < (r+1)*c.hidden; j++ {
					if math.IsNaN(float64(got[j])) || math.IsInf(float64(got[j]), 0) {
						t.Fatalf("row %d element %d is %v (unwritten or not finite), reference %v", r, j-r*c.hidden, got[j], want[j])
					}
					d := float64(got[j]) - float64(want[j])
					rn += d * d
					rd += float64(want[j]) * float64(want[j])
				}
				if rd == 0 {
					t.Fatalf("reference row %d is all zeros: the test inputs are degenerate", r)
				}
				num, den = num+rn, den+rd
				if e := math.Sqrt(rn / rd); e > worst {
					worst, worstRow = e, r
				}
			}
			rel := math.Sqrt(num / den)
			t.Logf("normalised error %.3g, worst row %d: %.3g", rel, worstRow, worst)
			if rel > 1e-2 || worst > 5e-2 {
				t.Errorf("normalised error %.3g (bound 1e-2), worst row %d %.3g (bound 5e-2)", rel, worstRow, worst)
			}
			if !c.grouped && rel > 1e-4 {
				t.Errorf("per-token path: normalised error %.3g, want f32-close (1e-4)", rel)
			}
		})
	}
}

// TestBenchMoEPrefill times one MoE layer of Qwen3-30B-A3B's shape (128
// experts, top-8, hidden 2048, expert width 768, 4-bit g64, bf16 scales;
// random weights) on the grouped path and the per-token path, and checks
// that the two agree (1e-2 normalised). MLXCEL_CUDA_BENCH=1 enables it.
func TestBenchMoEPrefill(t *testing.T) {
	o := benchEnabled(t)
	b := newOrSkip(t)
	defer b.Close()
	defer o.print()
	const E, topk, hidden, inter = 128, 8, 2048, 768
	upload := func(h *tensor.Host) backend.Weight {
		w, err := b.UploadWeight(h)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	qw := func(name string, out, in int, seed uint64) backend.Weight {
		sc, bi := make([]float32, E*out*in/64), make([]float32, E*out*in/64)
		for i := range sc {
			sc[i] = 0.004 + 0.004*float32(i%7)/7
			bi[i] = -8 * sc[i]
		}
		return upload(&tensor.Host{Name: name, Shape: []int{E, out, in}, Data: rnd(E*out*in/2, seed),
			Quant: &tensor.Quant{Bits: 4, GroupSize: 64, Scales: half(sc, tensor.BF16), Biases: half(bi, tensor.BF16), ScaleDType: tensor.BF16}})
	}
	rng := rand.New(rand.NewSource(1))
	randn := func(n int, s float64) []float32 {
		x := make([]float32, n)
		for j := range x {
			x[j] = float32(rng.NormFloat64() * s)
		}
		return x
	}
	ex := backend.Experts{Gate: qw("gate", inter, hidden, 1), Up: qw("up", inter, hidden, 2), Down: qw("down", hidden, inter, 3)}
	router := upload(bf16Host("router", []int{E, hidden}, randn(E*hidden, 0.02)))
	wbytes := 3.0 * E * inter * hidden * (0.5 + 4.0/64)
	p := backend.MoEParams{TopK: topk, Renorm: true, Act: backend.SiLU}
	for _, T := range []int{32, 64, 128, 512, 2048} {
		xt := upload(&tensor.Host{Name: "x", Shape: []int{T, hidden}, DType: tensor.F32, Data: f32le(randn(T*hidden, 1))})
		batch := &backend.Batch{Tokens: make([]int32, T), Positions: make([]int32, T),
			Seqs: []backend.SeqSlice{{Start: 0, Len: T, Blocks: []int32{0}}}}
		for j := range T {
			batch.Tokens[j], batch.Positions[j] = int32(j), int32(j)
		}
		var outs [2][]float32
		for k, grouped := range []bool{true, false} {
			moe := b.MoE
			if !grouped {
				moe = b.moeSeven // the per-token path
			}
			reps := 5
			if !grouped {
				reps = 2
			}
			if err := b.BeginStep(batch); err != nil {
				t.Fatal(err)
			}
			x, out := b.NewTensor(T, hidden), b.NewTensor(T, hidden)
			b.Embed(x, xt)
			moe(out, x, router, ex, p) // warm-up
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			for range reps {
				moe(out, x, router, ex, p)
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			us := float64(time.Since(t0).Microseconds()) / float64(reps)
			outs[k] = make([]float32, T*hidden)
			b.ReadRows(out, outs[k])
			cfg := map[bool]string{true: "grouped", false: "per-token"}[grouped]
			t.Logf("T=%d %s: %.0f us per layer", T, cfg, us)
			o.add("moe_prefill", cfg, T, "E128top8_2048x768_q4g64", us, wbytes/us/1e3, 0, "one MoE layer")
		}
		groupedMatches(t, T, outs[0], outs[1])
	}
}

func f32le(x []float32) []byte {
	out := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}

func half(x []float32, dt tensor.DType) []byte {
	out := make([]byte, 2*len(x))
	for i, v := range x {
		h := tensor.F32ToBF16(v)
		if dt == tensor.F16 {
			h = tensor.F32ToF16(v)
		}
		binary.LittleEndian.PutUint16(out[2*i:], h)
	}
	return out
}

func bf16Host(name string, shape []int, x []float32) *tensor.Host {
	return &tensor.Host{Name: name, Shape: shape, DType: tensor.BF16, Data: half(x, tensor.BF16)}
}

// qHost quantizes x ([experts*out, in]) with MLX's affine rule at the
// given width; scales and biases are stored as sdt (bf16 or f16).
func qHost(t *testing.T, name string, shape []int, x []float32, bits, group int, sdt tensor.DType) *tensor.Host {
	in := shape[len(shape)-1]
	words, sc, bi, err := quant.Quantize(x, len(x)/in, in, bits, group)
	if err != nil {
		t.Fatal(err)
	}
	wb := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(wb[4*i:], w)
	}
	return &tensor.Host{Name: name, Shape: shape, Data: wb,
		Quant: &tensor.Quant{Bits: bits, GroupSize: group, Scales: half(sc, sdt), Biases: half(bi, sdt), ScaleDType: sdt}}
}
