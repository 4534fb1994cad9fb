package kvcache

import "testing"

// With snapshots a prefix is found only up to the last block whose end has
// one; places are reused least recently used first; a dropped snapshot
// ends its hits.
func TestSnapshotsGateHits(t *testing.T) {
	m, err := NewWithOptions(32, 4, Options{PrefixCache: true, Snapshots: 2})
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]int32, 17) // four full blocks and one more token
	for i := range tokens {
		tokens[i] = int32(100 + i)
	}
	hashes := HashBlocks(nil, tokens, 4)
	if _, err := m.AllocateCached(1, hashes, len(tokens)); err != nil {
		t.Fatal(err)
	}
	m.Commit(1, hashes[:4])
	if hit, _ := m.Lookup(hashes, len(tokens)); hit != 0 {
		t.Fatalf("hit %d blocks with no snapshot", hit)
	}
	if p, fresh := m.TakeSnapshot(hashes[1]); !fresh || p != 0 {
		t.Fatalf("first snapshot: place %d fresh %v", p, fresh)
	}
	if hit, _ := m.Lookup(hashes, len(tokens)); hit != 2 {
		t.Fatalf("hit %d blocks, want 2 (the snapshot ends block 1)", hit)
	}
	if p, fresh := m.TakeSnapshot(hashes[1]); fresh || p != 0 {
		t.Fatalf("same prefix again: place %d fresh %v", p, fresh)
	}
	if p, _ := m.TakeSnapshot(hashes[3]); p != 1 {
		t.Fatalf("second snapshot in place %d", p)
	}
	if hit, _ := m.Lookup(hashes, len(tokens)); hit != 4 {
		t.Fatalf("hit %d blocks, want 4", hit)
	}
	m.SnapshotFor(hashes[1]) // block 1's is now the more recently used
	if p, _ := m.TakeSnapshot(hashes[2]); p != 1 {
		t.Fatalf("a third snapshot took place %d, want 1 (least recently used)", p)
	}
	if _, ok := m.SnapshotFor(hashes[3]); ok {
		t.Fatal("the evicted snapshot is still found")
	}
	if hit, _ := m.Lookup(hashes, len(tokens)); hit != 3 {
		t.Fatalf("hit %d blocks, want 3", hit)
	}
	m.DropSnapshot(hashes[2])
	if hit, _ := m.Lookup(hashes, len(tokens)); hit != 2 {
		t.Fatalf("after the drop: hit %d blocks, want 2", hit)
	}
}
