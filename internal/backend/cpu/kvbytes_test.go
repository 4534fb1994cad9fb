package cpu

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// KVStoreBytes, which the memory estimates and the server's sizing ask,
// is what NewKVStore allocates for the fixtures' layers: paged and ring
// K/V at each dtype, none for KV-shared layers, per-slot float32 state for
// linear attention.
func TestKVStoreBytesIsAllocated(t *testing.T) {
	b := New(1)
	for _, name := range []string{"llama-bf16", "qwen3_5_text-bf16", "qwen3_5_moe_text-bf16", "gemma4_e-bf16", "gemma4-bf16", "gpt_oss-bf16"} {
		cfg, err := weights.LoadConfig("../../../../shared/testdata/tiny/" + name)
		if err != nil {
			t.Fatal(err)
		}
		layers, err := model.KVLayersFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		window := 0
		for _, l := range layers {
			window = max(window, l.Window)
		}
		specs := []backend.KVSpec{{NumBlocks: 7, BlockSize: 16, Slots: 3, Layers: layers}}
		if window > 0 {
			specs = append(specs, backend.KVSpec{NumBlocks: 7, BlockSize: 16, Slots: 3, RingTokens: window + 40, Layers: layers})
		}
		for _, spec := range specs {
			for _, dt := range []backend.KVDtype{backend.KVAuto, backend.KVF32, backend.KVBF16, backend.KVFP8} {
				spec.Dtype = dt
				checkKVBytes(t, b, name, spec)
			}
		}
	}
}

func checkKVBytes(t *testing.T, b *Backend, name string, spec backend.KVSpec) {
	kv, err := b.NewKVStore(spec)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	got := 0
	for i := range spec.Layers {
		got += kv.(*kvStore).bytes(i)
	}
	if want := b.KVStoreBytes(spec); int64(got) != want {
		t.Errorf("%s, %s, %d ring tokens: allocated %d bytes, KVStoreBytes %d", name, spec.Dtype, spec.RingTokens, got, want)
	}
	if c := backend.KVCostOf(b, spec); c.Bytes(spec.NumBlocks) != int64(got) {
		t.Errorf("%s, %s, %d ring tokens: KVCost %+v gives %d at %d blocks, allocated %d", name, spec.Dtype, spec.RingTokens, c, c.Bytes(spec.NumBlocks), spec.NumBlocks, got)
	}
}

// A dtype the store does not keep is refused, naming the flag.
func TestKVDtypeRefused(t *testing.T) {
	_, err := New(1).NewKVStore(backend.KVSpec{NumBlocks: 1, BlockSize: 1, Layers: []backend.KVLayer{{KVHeads: 1, HeadDim: 8}}, Dtype: "f16"})
	if err == nil || !strings.Contains(err.Error(), "--kv-cache-dtype f16") {
		t.Errorf("got %v, want a refusal naming --kv-cache-dtype", err)
	}
}
