package kvcache

// Models with per-slot state (recurrent layers, sliding-window rings) need
// more than blocks for a prefix hit: the state their slot had at the
// prefix's last position. The KV store keeps a few copies of a slot's state
// (backend.SlotSnapshotter); this is their bookkeeping: which place holds
// the state at the end of which block (named by the block's chain hash, so
// by the whole prefix), least recently used evicted first. A snapshot is
// useful only while its prefix's blocks are cached too; Lookup asks for
// both.

type snapshots struct {
	byHash map[BlockHash]int
	hash   []BlockHash // hash[i] is valid while used[i]
	used   []bool
	last   []uint64 // last use, for eviction
	tick   uint64
}

func newSnapshots(n int) *snapshots {
	return &snapshots{byHash: map[BlockHash]int{}, hash: make([]BlockHash, n), used: make([]bool, n), last: make([]uint64, n)}
}

func (s *snapshots) has(h BlockHash) bool { _, ok := s.byHash[h]; return ok }

func (s *snapshots) touch(i int) {
	s.tick++
	s.last[i] = s.tick
}

// Snapshots reports whether prefix hits need a per-slot state snapshot.
func (m *Manager) Snapshots() bool { return m.snaps != nil }

// SnapshotFor is the place holding the state at the end of the block
// named h, marked as just used; ok is false when there is none.
func (m *Manager) SnapshotFor(h BlockHash) (place int, ok bool) {
	if m.snaps == nil {
		return 0, false
	}
	place, ok = m.snaps.byHash[h]
	if ok {
		m.snaps.touch(place)
	}
	return place, ok
}

// TakeSnapshot names a place for the state at the end of the block named
// h, evicting the least recently used snapshot when all are taken; fresh
// is false when h already has one (nothing to save). The caller saves the
// slot's state there before any later step runs.
func (m *Manager) TakeSnapshot(h BlockHash) (place int, fresh bool) {
	s := m.snaps
	if s == nil {
		panic("kvcache: TakeSnapshot without snapshots")
	}
	if p, ok := s.byHash[h]; ok {
		s.touch(p)
		return p, false
	}
	place = 0
	for i := range s.used {
		if !s.used[i] {
			place = i
			break
		}
		if s.last[i] < s.last[place] {
			place = i
		}
	}
	if s.used[place] {
		delete(s.byHash, s.hash[place])
	}
	s.used[place], s.hash[place] = true, h
	s.byHash[h] = place
	s.touch(place)
	return place, true
}

// DropSnapshot forgets the snapshot of h (its save was in a step that
// failed).
func (m *Manager) DropSnapshot(h BlockHash) {
	if s := m.snaps; s != nil {
		if p, ok := s.byHash[h]; ok {
			delete(s.byHash, h)
			s.used[p] = false
		}
	}
}
