package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// The chunked delta rule (several tokens of a sequence in one call, in
// chunks of ChunkSize) equals the one-token recurrence fed token by
// token, whatever the call boundaries; two sequences in one step keep
// their own state in their slots.
func TestGatedDeltaNetChunkedMatchesRecurrent(t *testing.T) {
	p := backend.DeltaNetParams{KHeads: 2, VHeads: 4, KDim: 8, VDim: 6, ConvKernel: 4, ChunkSize: 16}
	rng := rand.New(rand.NewPCG(1, 2))
	randn := func(n int, s float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * s)
		}
		return x
	}
	b := New(2)
	up := func(x []float32, shape ...int) backend.Weight {
		data := make([]byte, 4*len(x))
		for i, v := range x {
			u := math.Float32bits(v)
			data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		}
		w, err := b.UploadWeight(&tensor.Host{Name: "w", Shape: shape, DType: tensor.F32, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	C, V := p.Channels(), p.VHeads*p.VDim
	w := backend.DeltaNetWeights{Conv: up(randn(C*p.ConvKernel, 0.5), C, 1, p.ConvKernel),
		ALog: up(randn(p.VHeads, 0.5), p.VHeads), DtBias: up(randn(p.VHeads, 0.5), p.VHeads)}
	const T = 70 // more than four chunks
	type seq struct{ qkv, a, bb []float32 }
	seqs := []seq{{randn(T*C, 1), randn(T*p.VHeads, 1), randn(T*p.VHeads, 1)},
		{randn(T*C, 1), randn(T*p.VHeads, 1), randn(T*p.VHeads, 1)}}
	spec := backend.KVSpec{NumBlocks: 1, BlockSize: 16, Slots: 2, Layers: []backend.KVLayer{{DeltaNet: p}}}
	// run feeds both sequences (slots 1 and 0) in calls of the given
	// lengths and returns their outputs.
	run := func(lens []int) [2][]float32 {
		kv, err := b.NewKVStore(spec)
		if err != nil {
			t.Fatal(err)
		}
		var out [2][]float32
		pos := 0
		for _, n := range lens {
			batch := &backend.Batch{}
			qkv, ga, gb := b.NewTensor(2*n, C), b.NewTensor(2*n, p.VHeads), b.NewTensor(2*n, p.VHeads)
			for i, s := range seqs {
				batch.Seqs = append(batch.Seqs, backend.SeqSlice{Start: i * n, Len: n, Slot: 1 - i})
				for j := range n {
					batch.Tokens = append(batch.Tokens, 0)
					batch.Positions = append(batch.Positions, int32(pos+j))
				}
				copy(qkv.(*Tensor).d[i*n*C:], s.qkv[pos*C:(pos+n)*C])
				copy(ga.(*Tensor).d[i*n*p.VHeads:], s.a[pos*p.VHeads:(pos+n)*p.VHeads])
				copy(gb.(*Tensor).d[i*n*p.VHeads:], s.bb[pos*p.VHeads:(pos+n)*p.VHeads])
			}
			if err := b.BeginStep(batch); err != nil {
				t.Fatal(err)
			}
			dst := b.NewTensor(2*n, V)
			b.GatedDeltaNet(dst, qkv, ga, gb, w, kv, 0, p)
			for i := range seqs {
				out[i] = append(out[i], dst.(*Tensor).d[i*n*V:(i+1)*n*V]...)
			}
			pos += n
		}
		return out
	}
	ones := make([]int, T)
	for i := range ones {
		ones[i] = 1
	}
	want := run(ones)
	for _, lens := range [][]int{{T}, {17, 1, 40, 12}, {16, 16, 38}, {3, 64, 3}} {
		got := run(lens)
		for i := range got {
			var md, mr float64
			for j, v := range want[i] {
				md = math.Max(md, math.Abs(float64(got[i][j]-v)))
				mr = math.Max(mr, math.Abs(float64(v)))
			}
			if md > 1e-5*mr {
				t.Errorf("calls of %v, sequence %d: max|diff| %.3g of max %.3g", lens, i, md, mr)
			}
		}
	}
	if want[0][0] == want[1][0] {
		t.Error("the two sequences gave the same first output")
	}

	// A chunk that does not continue its slot's positions is refused.
	kv, err := b.NewKVStore(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a chunk at position 5 of an empty slot did not panic")
		}
	}()
	b.BeginStep(&backend.Batch{Tokens: []int32{0}, Positions: []int32{5}, Seqs: []backend.SeqSlice{{Len: 1}}})
	b.GatedDeltaNet(b.NewTensor(1, V), b.NewTensor(1, C), b.NewTensor(1, p.VHeads), b.NewTensor(1, p.VHeads), w, kv, 0, p)
}

// Sigmoid gates: elementwise, and a one-column gate scaling whole rows.
func TestGatedActSigmoid(t *testing.T) {
	b := New(1)
	g, u := b.NewTensor(2, 1), b.NewTensor(2, 3)
	WriteRows(g, []float32{0, 2})
	WriteRows(u, []float32{1, 2, 3, 4, 5, 6})
	b.GatedAct(u, g, u, backend.Sigmoid)
	s := float32(1 / (1 + math.Exp(-2)))
	for i, want := range []float32{0.5, 1, 1.5, 4 * s, 5 * s, 6 * s} {
		if d := u.(*Tensor).d[i] - want; d > 1e-6 || d < -1e-6 {
			t.Errorf("row gate element %d: %v, want %v", i, u.(*Tensor).d[i], want)
		}
	}
	g2 := b.NewTensor(1, 2)
	u2 := b.NewTensor(1, 2)
	WriteRows(g2, []float32{0, -1})
	WriteRows(u2, []float32{2, 2})
	b.GatedAct(g2, g2, u2, backend.Sigmoid)
	if got := g2.(*Tensor).d; got[0] != 1 || math.Abs(float64(got[1])-2/(1+math.E)) > 1e-6 {
		t.Errorf("elementwise sigmoid gate: %v", got)
	}
}

// A recurrent layer keeps its state per slot and no K/V: its memory does
// not grow with the blocks; a spec without slots is refused.
func TestDeltaNetStateSize(t *testing.T) {
	p := backend.DeltaNetParams{KHeads: 2, VHeads: 4, KDim: 8, VDim: 6, ConvKernel: 4, ChunkSize: 64}
	for _, blocks := range []int{1, 100} {
		kv, err := New(1).NewKVStore(backend.KVSpec{NumBlocks: blocks, BlockSize: 16, Slots: 3, Layers: []backend.KVLayer{{DeltaNet: p}}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := kv.(*kvStore).bytes(0), 4*3*(3*p.Channels()+4*8*6); got != want {
			t.Errorf("%d blocks: %d bytes, want %d", blocks, got, want)
		}
	}
	if _, err := New(1).NewKVStore(backend.KVSpec{NumBlocks: 1, BlockSize: 16, Layers: []backend.KVLayer{{DeltaNet: p}}}); err == nil {
		t.Error("a recurrent layer without slots was accepted")
	}
}
