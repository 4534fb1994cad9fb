package engine

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// TestWindowedRingsUnderPreemption runs a model with a sliding-window layer
// whose KV lives in per-slot rings: many sequences share few slots, prefill
// chunks are longer than the window, positions wrap the ring many times and
// a small cache forces preemption (which must release the slot, and the
// re-admitted sequence refills whichever ring it gets). The fake model
// checks every row's window read from its ring against the paged history,
// and the outputs must equal each request alone.
func TestWindowedRingsUnderPreemption(t *testing.T) {
	m := newFake()
	m.window = 8
	e := newEngine(t, m, Config{Parallel: 4, PrefillChunk: 16, BlockSize: 16, NumBlocks: 40})
	spec := e.KVStore().Spec()
	if spec.Slots != 4 || spec.RingTokens != 8+e.Config().MaxBatchTokens {
		t.Fatalf("KV spec slots %d ring %d, want 4 and window + MaxBatchTokens", spec.Slots, spec.RingTokens)
	}
	e.Start()
	var reqs []Request
	for i := range 12 {
		reqs = append(reqs, Request{Prompt: prompt(20+i*7, i), MaxTokens: 150})
	}
	runConcurrent(t, e, m.vocab, reqs)
	if st := e.Stats(); st.Preemptions == 0 {
		t.Fatal("expected preemptions with a small cache")
	}
	waitFor(t, "blocks and slots freed", func() bool {
		return e.Stats().KVBlocksUsed == 0 && e.sched.KV().UsedSlots() == 0
	})
}

// TestKVSpecRings: rings only for models with a windowed layer, sized for
// the largest window plus a whole step, only where they are smaller than
// the paged store they replace, and only on a backend that keeps rings.
func TestKVSpecRings(t *testing.T) {
	full := []backend.KVLayer{{KVHeads: 2, HeadDim: 8}}
	mixed := []backend.KVLayer{{KVHeads: 2, HeadDim: 8, Window: 4}, {KVHeads: 2, HeadDim: 8, Window: 32}, {KVHeads: 1, HeadDim: 16}}
	cfg := Config{Parallel: 4, MaxBatchTokens: 100, NumBlocks: 1000, BlockSize: 16}
	for _, tc := range []struct {
		name   string
		cfg    Config
		layers []backend.KVLayer
		ring   int
		be     backend.Backend
	}{
		{"no window", cfg, full, 0, fakeBackend{}},
		{"windows", cfg, mixed, 32 + 100, fakeBackend{}},
		// 4 rings of 132 tokens are no smaller than 33 blocks of 16.
		{"ring not smaller", Config{Parallel: 4, MaxBatchTokens: 100, NumBlocks: 33, BlockSize: 16}, mixed, 0, fakeBackend{}},
		{"backend without rings", cfg, mixed, 0, pagedBackend{}},
	} {
		spec := kvSpec(tc.cfg, tc.layers, tc.be)
		if spec.RingTokens != tc.ring || spec.Slots != tc.cfg.Parallel || spec.NumBlocks != tc.cfg.NumBlocks || len(spec.Layers) != len(tc.layers) {
			t.Errorf("%s: spec %+v, want ring %d", tc.name, spec, tc.ring)
		}
	}
}

// pagedBackend keeps windowed layers paged (no FeatureRings), as the CUDA
// backend does.
type pagedBackend struct{ fakeBackend }

func (pagedBackend) Supports(backend.Feature) bool { return false }
