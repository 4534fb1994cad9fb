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

// instantRowModel is instantModel sampling on its "backend": ForwardSample
// answers at once with the token after each row's position, so a
// benchmark over it measures the engine's host work of a sampled or
// constrained step. Its asynchronous and prepared forms answer at once
// too (the engine's side of run-ahead and of the prepared path).
type instantRowModel struct{ instantModel }

func (instantRowModel) CanSampleRows() bool { return true }
func (m instantRowModel) ForwardSample(b *backend.Batch, _ backend.KVStore, rows []backend.SampleRow) ([]backend.Sampled, error) {
	out := make([]backend.Sampled, len(rows))
	for i := range out {
		id := (b.Positions[b.LogitRows[i]] + 1) % int32(m.vocab)
		if a := rows[i].Allowed; a != nil && a[id/64]>>(id%64)&1 == 0 {
			id = 0 // the cached mask below allows every token but a few
		}
		out[i].ID = id
	}
	return out, nil
}

func (m instantRowModel) ForwardArgmaxAsync(b *backend.Batch, kv backend.KVStore) (backend.PendingIDs, error) {
	ids, err := m.ForwardArgmax(b, kv)
	return backend.ReadyIDs{IDs: ids, Err: err}, err
}

func (m instantRowModel) ForwardSampleAsync(b *backend.Batch, kv backend.KVStore, rows []backend.SampleRow) (backend.PendingSamples, error) {
	res, err := m.ForwardSample(b, kv, rows)
	return backend.ReadySamples{Rows: res, Err: err}, err
}

// ForwardQueued hands the batch over as the "logits" SampleQueued samples
// (the engine samples a queued step before it builds the next batch).
func (m instantRowModel) ForwardQueued(b *backend.Batch, _ backend.KVStore) (backend.Tensor, error) {
	return instantLogits{b: b}, nil
}

func (m instantRowModel) SampleQueued(logits backend.Tensor, rows []backend.SampleRow) (backend.PendingSamples, error) {
	res, err := m.ForwardSample(logits.(instantLogits).b, nil, rows)
	return backend.ReadySamples{Rows: res, Err: err}, err
}

// instantLogits is instantRowModel's queued step.
type instantLogits struct {
	backend.Tensor
	b *backend.Batch
}

func (m instantRowModel) ForwardSamplePrepared(b *backend.Batch, kv backend.KVStore, prepare func() ([]backend.SampleRow, error)) ([]backend.Sampled, error) {
	rows, err := prepare()
	if err != nil {
		return nil, err
	}
	return m.ForwardSample(b, kv, rows)
}

// cachedMask is a constraint whose mask is a copy of a precomputed one,
// as a grammar's warm state is (grammar.Matcher.Mask).
type cachedMask struct{ mask []uint64 }

func (c cachedMask) Mask(allowed []uint64) error { copy(allowed, c.mask); return nil }
func (c cachedMask) Accept(int32) error          { return nil }

// BenchmarkEngineStep64 is the engine's host time per step of 64 decoding
// sequences on the row-sampling path, sampled and constrained (a
// 128k-vocabulary mask a row), one step at a time and running ahead. One
// at a time, a GPU waits on this between steps (a constrained step's masks
// excepted: they overlap its forward); running ahead, it overlaps the
// GPU's step instead.
func BenchmarkEngineStep64(bm *testing.B) {
	const vocab, seqs, tokens = 128256, 64, 256
	full := make([]uint64, (vocab+63)/64)
	for i := range full {
		full[i] = ^uint64(0)
	}
	for _, c := range []struct {
		name        string
		ahead       RunAheadMode
		constrained bool
	}{{"sampled", RunAheadOff, false}, {"sampled-ahead", RunAheadAlways, false}, {"constrained", RunAheadOff, true},
		{"constrained-ahead", RunAheadAlways, true}} {
		bm.Run(c.name, func(bm *testing.B) {
			e, err := New(instantRowModel{instantModel{vocab: vocab}}, Config{Parallel: seqs, NumBlocks: 8192, MaxContext: 4096, RunAhead: c.ahead})
			if err != nil {
				bm.Fatal(err)
			}
			defer e.Stop()
			e.Start()
			bm.ResetTimer()
			for range bm.N {
				var streams []*Stream
				for range seqs {
					r := Request{Prompt: []int32{1, 2, 3}, MaxTokens: tokens, IgnoreEOS: true}
					r.Params.Temperature = 0.7
					if c.constrained {
						r.Constraint = cachedMask{full}
					}
					s, err := e.Submit(context.Background(), r)
					if err != nil {
						bm.Fatal(err)
					}
					streams = append(streams, s)
				}
				for _, s := range streams {
					for range s.Events() {
					}
				}
			}
			bm.StopTimer()
			st := e.Stats()
			if ahead := st.RunAheadSampled > 0; ahead != (c.ahead == RunAheadAlways) {
				bm.Fatalf("%d sampled steps ran ahead", st.RunAheadSampled)
			}
			bm.ReportMetric(float64(bm.Elapsed().Microseconds())/float64(bm.N*tokens), "us/step")
		})
	}
}
