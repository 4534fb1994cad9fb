package engine_test

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// KVBlocksWithin is the largest cache whose store, as New sizes it (rings
// for windowed layers once they are the smaller choice, per-slot state),
// fits the budget: n blocks fit and n+1 do not, on both sides of the point
// where the rings take over.
func TestKVBlocksWithin(t *testing.T) {
	be := cpu.New(1)
	for _, name := range []string{"gpt_oss-bf16", "gemma4_e-bf16", "qwen3_5_text-bf16", "llama-bf16"} {
		cfg, err := weights.LoadConfig("../../../shared/testdata/tiny/" + name)
		if err != nil {
			t.Fatal(err)
		}
		layers, err := model.KVLayersFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range []backend.KVDtype{backend.KVAuto, backend.KVFP8} {
			checkKVBlocksWithin(t, be, name, layers, engine.Config{BlockSize: 16, Parallel: 4, PrefillChunk: 32, KVDtype: dt})
		}
	}
}

func checkKVBlocksWithin(t *testing.T, be backend.Backend, name string, layers []backend.KVLayer, c engine.Config) {
	bytes := func(blocks int) int64 {
		c := c
		c.NumBlocks = blocks
		return backend.KVStoreBytes(be, engine.KVSpec(be, c, layers))
	}
	// Windows of 8 at 4 slots: rings of 8+36 tokens past 11 blocks.
	for _, blocks := range []int{1, 2, 5, 10, 11, 12, 17, 60, 200, 1000} {
		for _, budget := range []int64{bytes(blocks) - 1, bytes(blocks), bytes(blocks) + 1000} {
			n := engine.KVBlocksWithin(be, c, layers, budget)
			if n > 0 && bytes(n) > budget || bytes(n+1) <= budget {
				t.Errorf("%s, %s: %d bytes: %d blocks (%d bytes), %d blocks would be %d", name, c.KVDtype, budget, n, bytes(n), n+1, bytes(n+1))
			}
		}
	}
}
