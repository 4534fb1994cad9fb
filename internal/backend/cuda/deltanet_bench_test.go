//go:build linux

package cuda

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// TestBenchDeltaNet times one Gated DeltaNet layer's launches (conv, then
// the recurrent scan or the chunked prep and scan) at Qwen3.5-35B-A3B's
// shapes (16 key and 32 value heads of 128, conv 4): decode of 1 and 64
// sequences whose states hold 4 positions (so the scan reads and writes
// them), and prefills of 64, 512, 2048 and 8192 tokens, each in the
// recurrent form (Tuning.DeltaChunkMin 0) and the chunked one (the
// default). The GB/s column counts the state read and written and the
// conv's rows.
// MLXCEL_CUDA_BENCH=1 enables it (-test.run TestBenchDeltaNet alone).
func TestBenchDeltaNet(t *testing.T) {
	o := benchEnabled(t)
	b := newOrSkip(t)
	defer b.Close()
	defer o.print()
	p := backend.DeltaNetParams{KHeads: 16, VHeads: 32, KDim: 128, VDim: 128, ConvKernel: 4, ChunkSize: 64}
	C, hv := p.Channels(), p.VHeads
	rng := rand.New(rand.NewSource(5))
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
	type benchCase struct {
		name       string
		seqs, lead int // sequences, positions each state holds before the timed step
		n          int // tokens of each sequence in the timed step
		chunkMin   int // Tuning.DeltaChunkMin
	}
	cases := []benchCase{{"decode", 1, 4, 1, plan.DeltaChunkMin}, {"decode", 64, 4, 1, plan.DeltaChunkMin}}
	for _, n := range []int{64, 512, 2048, 8192} {
		cases = append(cases, benchCase{"prefill-recurrent", 1, 0, n, 0}, benchCase{"prefill-chunked", 1, 0, n, 1})
	}
	for _, c := range cases {
		b.DeltaChunkMin = c.chunkMin
		kv, err := b.NewKVStore(backend.KVSpec{NumBlocks: 1, BlockSize: 16, Slots: c.seqs, Layers: []backend.KVLayer{{DeltaNet: p}}})
		if err != nil {
			t.Fatal(err)
		}
		step := func(first, n int) []launch {
			batch := &backend.Batch{}
			for s := range c.seqs {
				batch.Seqs = append(batch.Seqs, backend.SeqSlice{Start: s * n, Len: n, Blocks: []int32{0}, Slot: s})
				for i := range n {
					batch.Tokens = append(batch.Tokens, 0)
					batch.Positions = append(batch.Positions, int32(first+i))
				}
			}
			if err := b.BeginStep(batch); err != nil {
				t.Fatal(err)
			}
			T := c.seqs * n
			in, ga, gb, out := b.NewTensor(T, C), b.NewTensor(T, hv), b.NewTensor(T, hv), b.NewTensor(T, hv*p.VDim)
			b.mu.Lock()
			n0 := len(b.rec.ls)
			b.mu.Unlock()
			b.GatedDeltaNet(out, in, ga, gb, w, kv, 0, p)
			b.mu.Lock()
			defer b.mu.Unlock()
			return append([]launch(nil), b.rec.ls[n0:]...)
		}
		if c.lead > 0 {
			step(0, c.lead)
		}
		ls := step(c.lead, c.n)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		d := replayMedian(b, ls)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		T := c.seqs * c.n
		bytes := float64(c.seqs*p.StateFloats()*4*2) + float64(T*C*4*3)
		o.add("deltanet-qwen35-35b", c.name, T, fmt.Sprintf("seqs%d-k%dx%d-v%dx%d", c.seqs, p.KHeads, p.KDim, hv, p.VDim),
			float64(d.Nanoseconds())/1e3, bytes/d.Seconds()/1e9, 0, fmt.Sprintf("%.1f us a position of a sequence", float64(d.Nanoseconds())/1e3/float64(c.n)))
	}
}
