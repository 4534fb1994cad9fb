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

// BranchPoint: where a sequence's cached blocks end without a snapshot
// there; nothing when a snapshot ends them, without snapshots, or when no
// block is cached.
func TestBranchPoint(t *testing.T) {
	m, err := NewWithOptions(32, 4, Options{PrefixCache: true, Snapshots: 2})
	if err != nil {
		t.Fatal(err)
	}
	shared := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	a := append(append([]int32{}, shared...), 50, 51, 52, 53, 54)
	ha := HashBlocks(nil, a, 4)
	if got := m.BranchPoint(ha, len(a)); got != 0 {
		t.Fatalf("empty cache: branch point %d", got)
	}
	if _, err := m.AllocateCached(1, ha, len(a)); err != nil {
		t.Fatal(err)
	}
	m.Commit(1, ha[:4])
	m.TakeSnapshot(ha[3]) // a's own end, past the shared part
	m.Free(1)
	b := append(append([]int32{}, shared...), 60, 61, 62, 63, 64, 65)
	hb := HashBlocks(nil, b, 4)
	if got := m.BranchPoint(hb, len(b)); got != 12 {
		t.Fatalf("b shares 3 blocks with a, no snapshot ends them: branch point %d, want 12", got)
	}
	if hit, _ := m.Lookup(hb, len(b)); hit != 0 {
		t.Fatalf("b hit %d blocks before the branch point's snapshot", hit)
	}
	m.TakeSnapshot(hb[2])
	if hit, _ := m.Lookup(hb, len(b)); hit != 3 {
		t.Fatalf("with the branch point's snapshot b hits %d blocks, want 3", hit)
	}
	if got := m.BranchPoint(hb, len(b)); got != 0 {
		t.Fatalf("a snapshot ends the shared blocks: branch point %d, want 0", got)
	}
	plain, _ := NewWithOptions(32, 4, Options{PrefixCache: true})
	if got := plain.BranchPoint(hb, len(b)); got != 0 {
		t.Fatalf("without snapshots: branch point %d", got)
	}
}
