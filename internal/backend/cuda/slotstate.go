//go:build linux

package cuda

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// Slot snapshots for prefix caching (backend.SlotSnapshotter): the CUDA
// store pages every attention layer, windowed ones included (no rings), so
// a slot's own state is its recurrent layers' (Qwen3.5's Gated DeltaNet:
// the conv window and the delta-rule matrices). Snapshot place i is
// region Slots+i of each layer's state (deltaState); saving and restoring
// record one copy_f32 a layer, run in stream order with the steps around
// them, and move the host's position of the region along.

var _ backend.SlotSnapshotter = (*Backend)(nil)

// SaveSlot copies slot's recurrent state into place snap.
func (b *Backend) SaveSlot(kv backend.KVStore, slot, snap int) {
	b.copySlotState(kv, "SaveSlot", slot, snap, false)
}

// RestoreSlot copies place snap into slot, which continues from the
// position the state was saved at.
func (b *Backend) RestoreSlot(kv backend.KVStore, snap, slot int) {
	b.copySlotState(kv, "RestoreSlot", slot, snap, true)
}

func (b *Backend) copySlotState(kv backend.KVStore, op string, slot, snap int, restore bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := kv.(*kvStore)
	if !ok {
		panic(fmt.Sprintf("cuda: %s: KV store of type %T is not from the cuda backend", op, kv))
	}
	if slot < 0 || slot >= st.spec.Slots || snap < 0 || snap >= st.spec.Snapshots {
		panic(fmt.Sprintf("cuda: %s slot %d, snapshot %d: the store has %d slots and %d snapshot places", op, slot, snap, st.spec.Slots, st.spec.Snapshots))
	}
	from, to := slot, st.spec.Slots+snap
	if restore {
		from, to = to, from
	}
	for _, ds := range st.delta {
		if ds == nil {
			continue
		}
		n := ds.p.StateFloats()
		b.newLaunch("copy_f32", b.gridFor(n), 1, 1, 256).p(ds.ptr + uintptr(4*to*n)).p(ds.ptr + uintptr(4*from*n)).i64(n)
		ds.pos[to] = ds.pos[from]
	}
}
