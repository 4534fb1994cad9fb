package server

import (
	"github.com/mlxcel/mlxcel/internal/engine"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/memplan"
)

// fakeDevice is the embedded model's backend dressed as a device with a
// given memory: the sizing arithmetic is checked without a GPU.
type fakeDevice struct {
	backend.Backend
	free, total int64
}

func (fakeDevice) DeviceName() string { return "test device" }

// KVStoreBytes forwards to the embedded backend (backend.KVSizer).
func (d fakeDevice) KVStoreBytes(spec backend.KVSpec) int64 {
	return backend.KVStoreBytes(d.Backend, spec)
}

// SaveSlot and RestoreSlot forward too: the CUDA backend this stands for
// keeps slot snapshots (backend.SlotSnapshotter), which sizing counts.
func (d fakeDevice) SaveSlot(kv backend.KVStore, slot, snap int) {
	d.Backend.(backend.SlotSnapshotter).SaveSlot(kv, slot, snap)
}
func (d fakeDevice) RestoreSlot(kv backend.KVStore, snap, slot int) {
	d.Backend.(backend.SlotSnapshotter).RestoreSlot(kv, snap, slot)
}
func (d fakeDevice) MemoryInfo() (int64, int64, error) {
	return d.free, d.total, nil
}

// With no KV size given, a device backend's KV cache is what the
// utilization leaves after the memory in use and the activations, and
// --parallel 0 becomes as many slots as that holds 4096-token sequences.
func TestKVFromDeviceMemory(t *testing.T) {
	l := loadModel(t, "")
	per := kvCost(l, engine.Config{BlockSize: 16}).PerBlock
	const gib = int64(1) << 30
	be := fakeDevice{Backend: l.Model.Backend(), free: 10 * gib, total: 16 * gib}
	blocks, slots, note, ok, err := kvSizeOn(l, be, 0.9, engine.Config{BlockSize: 16, PrefillChunk: 512}, 512)
	if err != nil || !ok {
		t.Fatalf("sizing: ok %v err %v", ok, err)
	}
	// 0.9*16 GiB planned, 6 GiB in use: 8.4 GiB less the activations.
	if got := int64(blocks) * per; got > 84*gib/10 || got < 8*gib {
		t.Errorf("%d blocks of %d bytes = %d bytes, want a little under 8.4 GiB", blocks, per, got)
	}
	if want := min(blocks/(512/16), MaxAutoParallel); slots != want {
		t.Errorf("slots %d, want %d", slots, want)
	}
	if !strings.Contains(note, "parallel slots") || !strings.Contains(note, "90%") {
		t.Errorf("note %q", note)
	}
	// An explicit --parallel is kept.
	if _, slots, _, _, _ := kvSizeOn(l, be, 0.9, engine.Config{BlockSize: 16, Parallel: 3, PrefillChunk: 512}, 512); slots != 3 {
		t.Errorf("--parallel 3 became %d", slots)
	}
	// Nothing left: a clear error naming the flags.
	full := fakeDevice{Backend: l.Model.Backend(), free: gib, total: 16 * gib}
	if _, _, _, _, err := kvSizeOn(l, full, 0.9, engine.Config{BlockSize: 16, PrefillChunk: 512}, 512); err == nil || !strings.Contains(err.Error(), "--gpu-memory-utilization") {
		t.Errorf("a full device: %v", err)
	}
	// A host backend is not sized this way.
	if _, _, _, ok, _ := kvSizeOn(l, l.Model.Backend(), 0.9, engine.Config{BlockSize: 16, PrefillChunk: 512}, 512); ok {
		t.Error("the CPU backend was sized from device memory")
	}
}

// A hybrid model's slots each cost their recurrent state beside their
// blocks: --parallel 0 picks the most slots whose 512-token sequences and
// states fit, and the store the engine then allocates fits the budget.
func TestKVFromDeviceMemoryHybrid(t *testing.T) {
	l := loadModel(t, fixture("qwen3_5_text-bf16"))
	const mib = int64(1) << 20
	be := fakeDevice{Backend: l.Model.Backend(), free: 64 * mib, total: 64 * mib}
	blocks, slots, _, ok, err := kvSizeOn(l, be, 0.25, engine.Config{BlockSize: 16, PrefillChunk: 512}, 512)
	if err != nil || !ok {
		t.Fatalf("sizing: ok %v err %v", ok, err)
	}
	c := kvCost(l, engine.Config{BlockSize: 16, Parallel: 1})
	if c.Fixed <= 0 {
		t.Fatalf("no recurrent state counted: %+v", c)
	}
	// A step's activations: the 512-token chunk and a decode row for each of up to MaxAutoParallel slots.
	budget := 16*mib - memplan.New(l.Model.Cfg, be, 0, 512+MaxAutoParallel).ActBytes
	store := func(blocks, slots int) int64 {
		return backend.KVStoreBytes(be, engine.KVSpec(be, engine.Config{NumBlocks: blocks, BlockSize: 16, Parallel: slots, PrefillChunk: 512}, l.Model.KVLayers()))
	}
	if got := store(blocks, slots); got > budget || store(blocks+1, slots) <= budget {
		t.Errorf("%d blocks for %d slots: %d bytes of a %d budget, one more block %d", blocks, slots, got, budget, store(blocks+1, slots))
	}
	const perSeq = 512 / 16
	if blocks < slots*perSeq || (budget-int64(slots+1)*c.Fixed)/c.PerBlock >= int64((slots+1)*perSeq) {
		t.Errorf("%d slots of %d blocks each in %d blocks: not the most that fit", slots, perSeq, blocks)
	}
	if naive := int(budget / c.PerBlock / perSeq); slots >= naive {
		t.Errorf("%d slots: the state was not counted (%d without it)", slots, naive)
	}
	// --no-prefix-cache: no snapshot places, so a slot's state costs half
	// and more blocks (here the tiny state is not what limits the slots).
	noCache := engine.Config{BlockSize: 16, PrefillChunk: 512, DisablePrefixCache: true}
	if off := kvCost(l, engine.Config{BlockSize: 16, Parallel: 1, DisablePrefixCache: true}); 2*off.Fixed != c.Fixed {
		t.Errorf("a slot's fixed cost %d without prefix caching, %d with: want half (no snapshot place)", off.Fixed, c.Fixed)
	}
	if offBlocks, offSlots, _, _, err := kvSizeOn(l, be, 0.25, noCache, 512); err != nil || offSlots < slots || offSlots == slots && offBlocks <= blocks {
		t.Errorf("without prefix caching %d blocks for %d slots (%v), with it %d for %d: want more", offBlocks, offSlots, err, blocks, slots)
	}
}
