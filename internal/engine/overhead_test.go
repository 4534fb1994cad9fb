package engine

import (
	"context"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// instantModel answers every step at once through the argmax path (the
// one greedy serving takes), so a benchmark of the engine over it
// measures only the engine's own work per step.
type instantModel struct{ vocab int }

func (m instantModel) Vocab() int               { return m.vocab }
func (m instantModel) MaxContext() int          { return 1 << 16 }
func (m instantModel) Backend() backend.Backend { return fakeBackend{} }
func (m instantModel) KVLayers() []backend.KVLayer {
	return []backend.KVLayer{{KVHeads: 1, HeadDim: 1}}
}
func (m instantModel) Forward(b *backend.Batch, _ backend.KVStore) ([]float32, error) {
	return make([]float32, len(b.LogitRows)*m.vocab), nil
}
func (m instantModel) ForwardArgmax(b *backend.Batch, _ backend.KVStore) ([]int32, error) {
	ids := make([]int32, len(b.LogitRows))
	for i := range ids {
		ids[i] = int32((b.Positions[b.LogitRows[i]] + 1) % int32(m.vocab))
	}
	return ids, nil
}

// BenchmarkEngineDecodeStep is the engine's host time per decode step of
// one greedy sequence (scheduling, batch building, accepting and
// publishing the token), the part of serving at concurrency 1 that a
// device waits on between steps.
func BenchmarkEngineDecodeStep(bm *testing.B) {
	e, err := New(instantModel{vocab: 128256}, Config{Parallel: 1, NumBlocks: 4200, MaxContext: 1 << 16})
	if err != nil {
		bm.Fatal(err)
	}
	defer e.Stop()
	e.Start()
	const tokens = 1024
	bm.ResetTimer()
	for range bm.N {
		s, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2, 3}, MaxTokens: tokens, IgnoreEOS: true})
		if err != nil {
			bm.Fatal(err)
		}
		n := 0
		for ev := range s.Events() {
			if !ev.Done {
				n++
			}
		}
		if n != tokens {
			bm.Fatalf("%d tokens, want %d", n, tokens)
		}
	}
	bm.ReportMetric(float64(bm.Elapsed().Nanoseconds())/float64(bm.N*tokens), "ns/token")
}
