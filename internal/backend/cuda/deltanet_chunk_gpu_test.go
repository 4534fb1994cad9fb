//go:build linux

package cuda

import (
	"math"
	"math/rand"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// TestDeltaChunkGPU runs one sequence at Qwen3.5-35B-A3B's Gated DeltaNet
// shapes through an 8192-token prefill, a 100-token continuation and a
// decode token, once with every step on the recurrent scan
// (Tuning.DeltaChunkMin 0) and once by default (the first two steps
// chunked, the decode recurrent on the state the chunks left), and
// compares the outputs step by step: both are f32, so they agree to
// rounding (bound 1e-4 normalised; the conformance suite checks each
// against the CPU backend at shorter lengths).
func TestDeltaChunkGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	if b.deltaChunkKD < deltaMaxKDim { // the H200 grants the 226 KB of key dim 256
		t.Errorf("the chunked kernels got shared memory up to key dim %d, want %d", b.deltaChunkKD, deltaMaxKDim)
	}
	p := backend.DeltaNetParams{KHeads: 16, VHeads: 32, KDim: 128, VDim: 128, ConvKernel: 4, ChunkSize: 64}
	C, hv := p.Channels(), p.VHeads
	steps := []int{8192, 100, 1}
	total := 0
	for _, n := range steps {
		total += n
	}
	rng := rand.New(rand.NewSource(3))
	randn := func(n int, s float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * s)
		}
		return x
	}
	up := func(x []float32, shape ...int) backend.Weight {
		w, err := b.UploadWeight(&tensor.Host{Name: "w", Shape: shape, DType: tensor.F32, Data: f32le(x)})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := backend.DeltaNetWeights{Conv: up(randn(C*p.ConvKernel, 0.5), C, 1, p.ConvKernel), ALog: up(randn(hv, 0.5), hv), DtBias: up(randn(hv, 0.5), hv)}
	// The step's inputs are rows of tables picked by token id (Embed).
	tq, ta, tb := up(randn(total*C, 1), total, C), up(randn(total*hv, 1), total, hv), up(randn(total*hv, 1), total, hv)
	var outs [2][][]float32
	for form, min := range []int{0, plan.DeltaChunkMin} {
		b.DeltaChunkMin = min
		if chunked := b.deltaChunkMin(p.KDim) <= steps[0]; chunked != (form == 1) {
			t.Errorf("DeltaChunkMin %d: the 8192-token step chunked %v", min, chunked)
		}
		kv, err := b.NewKVStore(backend.KVSpec{NumBlocks: 1, BlockSize: 16, Slots: 1, Layers: []backend.KVLayer{{DeltaNet: p}}})
		if err != nil {
			t.Fatal(err)
		}
		first := 0
		for _, n := range steps {
			batch := &backend.Batch{Seqs: []backend.SeqSlice{{Start: 0, Len: n, Blocks: []int32{0}, Slot: 0}}}
			for i := range n {
				batch.Tokens = append(batch.Tokens, int32(first+i))
				batch.Positions = append(batch.Positions, int32(first+i))
			}
			if err := b.BeginStep(batch); err != nil {
				t.Fatal(err)
			}
			in, ga, gb, out := b.NewTensor(n, C), b.NewTensor(n, hv), b.NewTensor(n, hv), b.NewTensor(n, hv*p.VDim)
			b.Embed(in, tq)
			b.Embed(ga, ta)
			b.Embed(gb, tb)
			b.GatedDeltaNet(out, in, ga, gb, w, kv, 0, p)
			y := make([]float32, n*hv*p.VDim)
			b.ReadRows(out, y)
			outs[form] = append(outs[form], y)
			first += n
		}
		if err := b.FreeKVStore(kv); err != nil {
			t.Fatal(err)
		}
	}
	for si, n := range steps {
		rec, chk := outs[0][si], outs[1][si]
		var num, den float64
		for i := range rec {
			d := float64(chk[i]) - float64(rec[i])
			num += d * d
			den += float64(rec[i]) * float64(rec[i])
		}
		rel := math.Sqrt(num / math.Max(den, 1e-30))
		if rel > 1e-4 || math.IsNaN(rel) {
			t.Errorf("step %d (%d tokens): chunked against recurrent normalised error %.3g > 1e-4", si, n, rel)
		} else {
			t.Logf("step %d (%d tokens): chunked against recurrent normalised error %.3g", si, n, rel)
		}
	}
}
