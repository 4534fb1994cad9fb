package engine

import (
	"errors"
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine/sched"
)

// Prefix caching for models with per-slot state (docs/kv-cache.md): a
// sequence admitted on a cached prefix gets the snapshot of its slot state
// at the prefix's end restored before its first chunk, and a chunk that
// ends at its prefill's last block boundary leaves a snapshot after the
// step. Neither happens inside a step; both are ordered with the steps on
// the backend.

var errNoSnapshots = errors.New("engine: the plan restores a slot snapshot, but the backend keeps none")

// restoreSlots copies the snapshots plan's admissions found into their
// slots.
func (e *Engine) restoreSlots(plan *sched.Plan) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: restoring a slot snapshot: %v", p)
		}
	}()
	for _, it := range plan.Items {
		if !it.Restore {
			continue
		}
		ss, ok := e.m.Backend().(backend.SlotSnapshotter)
		if !ok {
			return errNoSnapshots
		}
		ss.RestoreSlot(e.kvStore, it.Snap, it.Slot)
	}
	return nil
}

// saveSlots, after plan's step succeeded, saves the slot state of each
// chunk that ended at its prefill's last block boundary, unless that
// prefix has a snapshot already. A save that fails forgets its snapshot;
// the slot itself is only read, so its request goes on.
func (e *Engine) saveSlots(plan *sched.Plan) {
	kv := e.sched.KV()
	for _, it := range plan.Items {
		if !it.Save {
			continue
		}
		place, fresh := kv.TakeSnapshot(it.SaveHash)
		if !fresh {
			continue
		}
		err := e.saveSlot(it.Slot, place)
		if err != nil {
			kv.DropSnapshot(it.SaveHash)
		}
		e.statsMu.Lock()
		if err != nil {
			e.stats.SnapshotFailures++
		} else {
			e.stats.SnapshotsSaved++
		}
		e.statsMu.Unlock()
	}
}

func (e *Engine) saveSlot(slot, place int) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: saving a slot snapshot: %v", p)
		}
	}()
	ss, ok := e.m.Backend().(backend.SlotSnapshotter)
	if !ok {
		return errNoSnapshots
	}
	ss.SaveSlot(e.kvStore, slot, place)
	return nil
}
