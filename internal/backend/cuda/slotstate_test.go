//go:build linux

package cuda

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// TestSlotSnapshotCopies records SaveSlot and RestoreSlot on a store with
// one attention and two Gated DeltaNet layers, without a device: one
// copy_f32 a recurrent layer between the slot's region and the snapshot
// place's (after the slots), the host positions moved with it, and
// misuse refused.
func TestSlotSnapshotCopies(t *testing.T) {
	b := hostOnlyBackend() // after a step began, as the engine calls them
	p := backend.DeltaNetParams{KHeads: 2, VHeads: 4, KDim: 16, VDim: 8, ConvKernel: 4, ChunkSize: 64}
	n := p.StateFloats()
	spec := backend.KVSpec{Slots: 3, Snapshots: 3, Layers: []backend.KVLayer{{KVHeads: 2, HeadDim: 64}, {DeltaNet: p}, {DeltaNet: p}}}
	if got, want := deltaStateBytes(spec, spec.Layers[1]), int64(4*6*n); got != want {
		t.Fatalf("deltaStateBytes %d, want %d (slots and snapshot places)", got, want)
	}
	ds := func(ptr uintptr) *deltaState {
		return &deltaState{p: p, ptr: ptr, pos: make([]int32, 6), used: make([]bool, 3)}
	}
	st := &kvStore{spec: spec, k: []uintptr{1 << 39, 0, 0}, v: []uintptr{1 << 40, 0, 0}, delta: []*deltaState{nil, ds(1 << 41), ds(1 << 42)}}
	st.delta[1].pos[2], st.delta[2].pos[2] = 48, 48

	b.SaveSlot(st, 2, 1)
	check := func(what string, to, from int) {
		t.Helper()
		names := launchNames(b)
		if len(names) != 2 || names[0] != "copy_f32" || names[1] != "copy_f32" {
			t.Fatalf("%s recorded %v, want copy_f32 for each recurrent layer", what, names)
		}
		for i, l := range b.rec.ls {
			base := st.delta[i+1].ptr
			if d, s, c := uintptr(l.args[0]), uintptr(l.args[1]), int(l.args[2]); d != base+uintptr(4*to*n) || s != base+uintptr(4*from*n) || c != n {
				t.Errorf("%s layer %d: copy to %#x from %#x, %d floats; want region %d from region %d, %d floats", what, i+1, d, s, c, to, from, n)
			}
		}
		b.rec.ls = b.rec.ls[:0]
	}
	check("SaveSlot(2 -> place 1)", 3+1, 2)
	if st.delta[1].pos[4] != 48 || st.delta[2].pos[4] != 48 {
		t.Errorf("place 1 holds positions %d/%d after the save, want 48", st.delta[1].pos[4], st.delta[2].pos[4])
	}
	b.RestoreSlot(st, 1, 0)
	check("RestoreSlot(place 1 -> 0)", 0, 3+1)
	if st.delta[1].pos[0] != 48 {
		t.Errorf("slot 0 holds position %d after the restore, want 48", st.delta[1].pos[0])
	}

	refuses := func(what, want string, f func()) {
		t.Helper()
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), want) {
				t.Errorf("%s: panic %v, want one saying %q", what, r, want)
			}
		}()
		f()
	}
	refuses("a snapshot place past the store's", "3 snapshot places", func() { b.SaveSlot(st, 0, 3) })
	refuses("a slot past the store's", "3 slots", func() { b.RestoreSlot(st, 0, 3) })
}
