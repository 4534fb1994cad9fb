package modeltest

import (
	"math"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/model"
)

// DecodeLogits runs prompt and then len(ids) decode steps on a fresh KV
// store of dtype dt, one sequence, and returns each step's logits: step 0
// is the prompt's last row, step i the row after feeding ids[i-1]. With
// greedy, ids are chosen here (argmax) and returned in ids; otherwise they
// are fed as given, so a second cache sees the first one's tokens and its
// steps stay comparable after a disagreement. The store is freed after.
func DecodeLogits(t *testing.T, m *model.Model, dt backend.KVDtype, prompt, ids []int32, greedy bool) [][]float32 {
	t.Helper()
	spec := backend.KVSpec{NumBlocks: (len(prompt)+len(ids))/16 + 1, BlockSize: 16, Layers: m.KVLayers(), Slots: 1, Dtype: dt}
	kv, err := m.Backend().NewKVStore(spec)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := m.Backend().(backend.KVFreer); ok {
		defer f.FreeKVStore(kv)
	}
	blocks := make([]int32, spec.NumBlocks)
	for i := range blocks {
		blocks[i] = int32(i)
	}
	var logits [][]float32
	toks, pos := prompt, 0
	for i := range ids {
		b := &backend.Batch{Tokens: toks, Seqs: []backend.SeqSlice{{Len: len(toks), Blocks: blocks}}, LogitRows: []int{len(toks) - 1}}
		for j := range toks {
			b.Positions = append(b.Positions, int32(pos+j))
		}
		out, err := m.Forward(b, kv)
		if err != nil {
			t.Fatal(err)
		}
		logits = append(logits, slices.Clone(out))
		if greedy {
			ids[i] = Argmax(out)
		}
		pos += len(toks)
		toks = ids[i : i+1]
	}
	return logits
}

// Top2Gap is the distance between the two largest values.
func Top2Gap(x []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range x {
		switch f := float64(v); {
		case f > a:
			a, b = f, a
		case f > b:
			b = f
		}
	}
	return a - b
}
