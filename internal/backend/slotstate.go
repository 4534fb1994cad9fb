package backend

// SlotSnapshotter is implemented by a backend whose KV store can copy the
// per-slot part of a sequence's cache (sliding-window rings, recurrent
// layers' state) into one of KVSpec.Snapshots snapshot places and back
// into any slot. Prefix caching for models with such layers rests on it: a
// prefix found in the cache brings its paged blocks and the per-slot state
// its sequence had at the prefix's end, which blocks cannot hold
// (docs/kv-cache.md). Both calls are ordered with the steps around them,
// as the backend's ops are; neither may run inside a step.
type SlotSnapshotter interface {
	// SaveSlot copies slot's per-slot state into place snap.
	SaveSlot(kv KVStore, slot, snap int)
	// RestoreSlot copies place snap into slot, which then continues from
	// the position the state was saved at.
	RestoreSlot(kv KVStore, snap, slot int)
}

// HasSlotState reports whether a store of spec keeps per-slot state that
// paged blocks do not cover: recurrent layers, or windowed layers in
// rings.
func HasSlotState(spec KVSpec) bool {
	for _, l := range spec.Layers {
		if l.Recurrent() || spec.InRing(l) {
			return true
		}
	}
	return false
}

// InRing reports whether a backend that keeps rings (FeatureRings) keeps
// layer l of spec in per-slot rings: a windowed layer with K/V of its own
// when the spec asks for rings.
func (spec KVSpec) InRing(l KVLayer) bool {
	return spec.Slots > 0 && spec.RingTokens > 0 && l.Window > 0 && !l.Shared && !l.Recurrent()
}
