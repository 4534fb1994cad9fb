//go:build linux

package cuda

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// TestFreeKVStoreGPU: a freed store's memory is back on the device: a
// 512 MiB store, made and freed four times, leaves the free memory where
// it was.
func TestFreeKVStoreGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	spec := backend.KVSpec{NumBlocks: 4096, BlockSize: 16, Layers: []backend.KVLayer{{KVHeads: 8, HeadDim: 128}, {KVHeads: 8, HeadDim: 128}}}
	want := b.KVStoreBytes(spec)
	before, _, err := b.MemoryInfo()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		kv, err := b.NewKVStore(spec)
		if err != nil {
			t.Fatal(err)
		}
		mid, _, _ := b.MemoryInfo()
		if before-mid < want {
			t.Fatalf("round %d: the store took %d bytes of device memory, want at least %d", i, before-mid, want)
		}
		if err := b.FreeKVStore(kv); err != nil {
			t.Fatal(err)
		}
	}
	after, _, _ := b.MemoryInfo()
	if before-after > 64<<20 {
		t.Fatalf("free memory %d before, %d after four stores of %d bytes were freed", before, after, want)
	}
	t.Logf("%d-byte store made and freed 4 times: free memory %d -> %d", want, before, after)
}
