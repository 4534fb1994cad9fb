package memplan

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/weights"
)

func TestKVTokens(t *testing.T) {
	const per = 128 << 10 // Llama-3.1-8B at f16: 32 layers x 8 heads x 128 x 2 x 2 bytes
	for _, tc := range []struct {
		r    Request
		want int
	}{
		{Request{}, 131072},                                               // run: one slot, the whole context
		{Request{CtxSize: 8192}, 8192},                                    // run --ctx-size
		{Request{CtxSize: 1000}, 1008},                                    // whole 16-token blocks
		{Request{Parallel: 8, DefaultPerSeq: 4096}, 32768},                // serve's default
		{Request{Parallel: 8, CtxSize: 2048, DefaultPerSeq: 4096}, 16384}, // serve --ctx-size 2048
		{Request{Parallel: 8, KVBlocks: 100}, 1600},
		{Request{Parallel: 8, KVMemMiB: 1024}, 8192}, // 1 GiB / 128 KiB
	} {
		if got := tc.r.KVTokens(131072, Estimate{KVPerToken: per}); got != tc.want {
			t.Errorf("%+v: %d tokens, want %d", tc.r, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	e := Estimate{StoredBytes: 4 << 30, Expansion: 1, KVPerToken: 128 << 10, ActBytes: 0, Available: 10 << 30, Source: "cuda free memory"}
	// 4 GiB of weights + 8 x 8192 tokens x 128 KiB = 8 GiB of KV: 12 GiB > 10.
	r := Request{Parallel: 8, CtxSize: 8192}
	err := Check(e, r, 131072, "llama on cuda")
	if err == nil {
		t.Fatal("12 GiB fit in 10")
	}
	msg := err.Error()
	// (10 GiB / 1.1 - 4 GiB) / 128 KiB = 41704 tokens.
	for _, w := range []string{"needs about 13.20 GiB", "weights 4.00 GiB", "KV cache 8.00 GiB for 65536 tokens: --parallel 8 x --ctx-size 8192",
		"10.00 GiB is free (cuda free memory)", "about 41704 tokens of KV cache fit", "--ctx-size", "--parallel", "smaller quantization", "--skip-mem-check"} {
		if !strings.Contains(msg, w) {
			t.Errorf("%q lacks %q", msg, w)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("not one line: %q", msg)
	}
	if err := Check(e, Request{Parallel: 4, CtxSize: 8192}, 131072, "llama"); err != nil {
		t.Errorf("8 GiB in 10: %v", err)
	}
	r.Skip = true
	if Check(e, r, 131072, "llama") != nil {
		t.Error("Skip did not skip")
	}
	e.StoredBytes = 12 << 30
	if err := Check(e, Request{CtxSize: 512}, 131072, "big"); err == nil || !strings.Contains(err.Error(), "weights alone do not fit") {
		t.Errorf("weights beyond memory: %v", err)
	}
	e.Available = -1
	if Check(e, Request{}, 131072, "unknown") != nil {
		t.Error("unknown memory must not stop a load")
	}
}

// tinyMem is the CPU backend reporting little free memory, as a full GPU
// would.
type tinyMem struct{ backend.Backend }

func (tinyMem) MemoryInfo() (int64, int64, error) { return 1 << 20, 80 << 30, nil }

// On a real checkpoint the estimate counts the stored weights and the KV
// geometry, and a backend's MemoryInfo is what it is checked against.
func TestNewOnCheckpoint(t *testing.T) {
	dir := "../../../shared/testdata/models/stories260k"
	cfg, err := weights.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(1)
	e := New(cfg, be, CheckpointBytes(dir), 512)
	// f32 weights (dim 64, 5 layers, vocab 512): the file's size; KV at
	// f32: 5 layers x 2 x 4 heads x 8 dims x 4 bytes.
	if e.StoredBytes < 1_000_000 || e.StoredBytes > 1_200_000 || e.KVPerToken != 1280 || e.Expansion < 1 {
		t.Errorf("estimate %+v", e)
	}
	if e.Available <= 0 || e.Source == "" {
		t.Errorf("host memory unknown on the cpu backend: %+v", e)
	}
	small := New(cfg, tinyMem{be}, CheckpointBytes(dir), 512)
	if small.Available != 1<<20 || small.Source != "cpu free memory" {
		t.Errorf("MemoryReporter ignored: %d %q", small.Available, small.Source)
	}
	if err := Check(small, Request{}, 512, "stories260k"); err == nil || !strings.Contains(err.Error(), "weights alone") {
		t.Errorf("1 MiB free: %v", err)
	}
}

// TestActBytesCountsMoEScratch: the grouped MoE's scratch of one layer is
// part of a step's activations. The CUDA backend's recording of
// Qwen3-30B-A3B's MoE op at 8448 tokens takes 1,031,201,280 bytes of it
// (internal/backend/cuda TestMoEScratchReusedAcrossLayers); the estimate
// must cover that without counting it once per layer.
func TestActBytesCountsMoEScratch(t *testing.T) {
	be := cpu.New(1)
	moe := weights.Config{Hidden: 2048, Intermediate: 6144, Heads: 32, HeadDim: 128, Vocab: 151936,
		NumExperts: 128, TopK: 8, MoEIntermediate: 768}
	dense := moe
	dense.NumExperts = 0
	const recorded = 1031201280
	got := actBytes(&moe, be, 8448) - actBytes(&dense, be, 8448)
	if got < recorded || got > recorded*11/10 {
		t.Errorf("MoE scratch estimated at %d bytes, the recorded op takes %d", got, recorded)
	}
}
