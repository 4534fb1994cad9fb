package cpu

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// Snapshot places follow the slots in each per-slot layer's storage
// (kvLayout): place i is slot region Slots+i, so saving and restoring are
// copies between regions of the same layout.

// SaveSlot copies slot's rings and recurrent state into place snap
// (backend.SlotSnapshotter).
func (b *Backend) SaveSlot(kv backend.KVStore, slot, snap int) {
	st := kv.(*kvStore)
	st.checkSnapshot("SaveSlot", slot, snap)
	st.copySlot(slot, st.spec.Slots+snap)
}

// RestoreSlot copies place snap into slot.
func (b *Backend) RestoreSlot(kv backend.KVStore, snap, slot int) {
	st := kv.(*kvStore)
	st.checkSnapshot("RestoreSlot", slot, snap)
	st.copySlot(st.spec.Slots+snap, slot)
}

func (s *kvStore) checkSnapshot(op string, slot, snap int) {
	if slot < 0 || slot >= s.spec.Slots || snap < 0 || snap >= s.spec.Snapshots {
		panic(fmt.Sprintf("cpu: %s slot %d, snapshot %d: the store has %d slots and %d snapshot places", op, slot, snap, s.spec.Slots, s.spec.Snapshots))
	}
}

// copySlot copies per-slot region from to region to in every layer that
// has one, the positions a recurrent state has absorbed included.
func (s *kvStore) copySlot(from, to int) {
	for layer, l := range s.spec.Layers {
		if s.ring[layer] {
			n := s.spec.RingTokens * l.KVHeads * l.HeadDim
			s.k[layer].copyWithin(to*n, from*n, n)
			s.v[layer].copyWithin(to*n, from*n, n)
		}
		if d := s.delta[layer]; d != nil {
			n := d.p.StateFloats()
			copy(d.data[to*n:(to+1)*n], d.data[from*n:(from+1)*n])
			d.pos[to] = d.pos[from]
		}
	}
}
