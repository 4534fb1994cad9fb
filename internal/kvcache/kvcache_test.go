package kvcache

import (
	"errors"
	"slices"
	"testing"
)

func mustNew(t *testing.T, blocks, size int) *Manager {
	t.Helper()
	m, err := New(blocks, size)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNewValidates(t *testing.T) {
	if _, err := New(0, 16); err == nil {
		t.Fatal("New(0, 16) should fail")
	}
	m := mustNew(t, 4, 0)
	if m.BlockSize() != DefaultBlockSize {
		t.Fatalf("block size %d, want default %d", m.BlockSize(), DefaultBlockSize)
	}
	if m.Capacity() != 4*DefaultBlockSize {
		t.Fatalf("capacity %d", m.Capacity())
	}
}

func TestAllocateGrowsAtBlockBoundaries(t *testing.T) {
	m := mustNew(t, 8, 4)
	const s SeqID = 1
	steps := []struct{ tokens, blocks int }{
		{1, 1}, {4, 1}, {5, 2}, {8, 2}, {9, 3}, {3, 3}, {12, 3}, {13, 4},
	}
	var prev []int32
	for _, st := range steps {
		tab, err := m.Allocate(s, st.tokens)
		if err != nil {
			t.Fatalf("Allocate(%d): %v", st.tokens, err)
		}
		if len(tab) != st.blocks {
			t.Fatalf("Allocate(%d): %d blocks, want %d", st.tokens, len(tab), st.blocks)
		}
		// Growth only appends: earlier positions keep their blocks.
		if !slices.Equal(tab[:len(prev)], prev) {
			t.Fatalf("table prefix changed: %v -> %v", prev, tab)
		}
		prev = slices.Clone(tab)
	}
	if m.UsedBlocks() != 4 || m.FreeBlocks() != 4 || m.Usage() != 0.5 {
		t.Fatalf("used %d free %d usage %v", m.UsedBlocks(), m.FreeBlocks(), m.Usage())
	}
	if !slices.Equal(m.Table(s), []int32{0, 1, 2, 3}) {
		t.Fatalf("table %v, want blocks handed out in order", m.Table(s))
	}
}

func TestExhaustionIsAllOrNothing(t *testing.T) {
	m := mustNew(t, 4, 4)
	if _, err := m.Allocate(1, 12); err != nil { // 3 blocks
		t.Fatal(err)
	}
	if !m.CanAdmit(4) || m.CanAdmit(5) {
		t.Fatalf("CanAdmit wrong with 1 free block")
	}
	if got := m.Needed(2, 8); got != 2 {
		t.Fatalf("Needed = %d, want 2", got)
	}
	tab, err := m.Allocate(2, 8)
	if !errors.Is(err, ErrOutOfBlocks) {
		t.Fatalf("err = %v, want ErrOutOfBlocks", err)
	}
	if tab != nil || m.FreeBlocks() != 1 || m.NumSeqs() != 1 {
		t.Fatalf("failed allocation changed state: tab %v free %d seqs %d", tab, m.FreeBlocks(), m.NumSeqs())
	}
	// Growing an existing sequence past the end fails the same way and
	// leaves its table intact.
	if _, err := m.Allocate(1, 100); !errors.Is(err, ErrOutOfBlocks) {
		t.Fatalf("err = %v", err)
	}
	if len(m.Table(1)) != 3 {
		t.Fatalf("table changed on failed growth: %v", m.Table(1))
	}
	if _, err := m.Allocate(1, 16); err != nil {
		t.Fatalf("last block should fit: %v", err)
	}
	if m.FreeBlocks() != 0 || m.Usage() != 1 {
		t.Fatalf("free %d usage %v", m.FreeBlocks(), m.Usage())
	}
}

func TestFreeAndReuse(t *testing.T) {
	m := mustNew(t, 6, 2)
	a, _ := m.Allocate(1, 6) // blocks 0,1,2
	a = slices.Clone(a)
	if _, err := m.Allocate(2, 4); err != nil { // blocks 3,4
		t.Fatal(err)
	}
	if n := m.Free(1); n != 3 {
		t.Fatalf("Free released %d, want 3", n)
	}
	if m.Table(1) != nil || m.NumSeqs() != 1 || m.FreeBlocks() != 4 {
		t.Fatalf("after free: table %v seqs %d free %d", m.Table(1), m.NumSeqs(), m.FreeBlocks())
	}
	// Freed blocks come back first, in the freed sequence's order.
	b, err := m.Allocate(3, 6)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b, a) {
		t.Fatalf("reused %v, want %v", b, a)
	}
	// No block is ever held twice.
	seen := map[int32]bool{}
	for _, s := range []SeqID{2, 3} {
		for _, blk := range m.Table(s) {
			if seen[blk] {
				t.Fatalf("block %d held twice", blk)
			}
			seen[blk] = true
		}
	}
}

func TestNoDoubleFree(t *testing.T) {
	m := mustNew(t, 4, 4)
	m.Allocate(1, 8)
	if m.Free(1) != 2 {
		t.Fatal("first free")
	}
	if m.Free(1) != 0 || m.Free(99) != 0 {
		t.Fatal("second free or unknown sequence released blocks")
	}
	if m.FreeBlocks() != 4 {
		t.Fatalf("free list has %d blocks, want exactly 4", m.FreeBlocks())
	}
	// The free list holds each block once: allocating everything gives
	// four distinct blocks and then fails.
	tab, err := m.Allocate(2, 16)
	if err != nil {
		t.Fatal(err)
	}
	s := slices.Clone(tab)
	slices.Sort(s)
	if !slices.Equal(s, []int32{0, 1, 2, 3}) {
		t.Fatalf("blocks %v", tab)
	}
	if _, err := m.Allocate(3, 1); !errors.Is(err, ErrOutOfBlocks) {
		t.Fatalf("err = %v", err)
	}
}

func TestManySequencesChurn(t *testing.T) {
	m := mustNew(t, 32, 16)
	live := map[SeqID]int{}
	next := SeqID(1)
	for i := range 2000 {
		// Deterministic pseudo-random workload: grow, admit or free.
		switch r := (i * 7919) % 5; {
		case r < 2 && len(live) > 0:
			for s, n := range live {
				n += 17
				if _, err := m.Allocate(s, n); err == nil {
					live[s] = n
				}
				break
			}
		case r < 4:
			n := 1 + (i*31)%50
			if m.CanAdmit(n) {
				if _, err := m.Allocate(next, n); err != nil {
					t.Fatalf("CanAdmit but Allocate failed: %v", err)
				}
				live[next] = n
				next++
			}
		default:
			for s := range live {
				m.Free(s)
				delete(live, s)
				break
			}
		}
		used := 0
		for s, n := range live {
			if len(m.Table(s)) != m.BlocksFor(n) {
				t.Fatalf("seq %d: %d blocks for %d tokens", s, len(m.Table(s)), n)
			}
			used += len(m.Table(s))
		}
		if used != m.UsedBlocks() || used+m.FreeBlocks() != m.NumBlocks() {
			t.Fatalf("accounting: used %d, manager says %d used %d free", used, m.UsedBlocks(), m.FreeBlocks())
		}
	}
	for s := range live {
		m.Free(s)
	}
	if m.UsedBlocks() != 0 || m.NumSeqs() != 0 {
		t.Fatalf("leak: used %d seqs %d", m.UsedBlocks(), m.NumSeqs())
	}
}

// Slots: one per sequence holding a table, lowest free first, stable while
// the table lives, released by Free and never held by two sequences.
func TestSlots(t *testing.T) {
	m, err := NewWithSlots(16, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewWithSlots(16, 4, -1); err == nil {
		t.Error("a negative slot count was accepted")
	}
	for s := SeqID(1); s <= 3; s++ {
		if _, err := m.Allocate(s, 1); err != nil {
			t.Fatal(err)
		}
		if got := m.Slot(s); got != int(s)-1 {
			t.Errorf("sequence %d: slot %d, want %d", s, got, s-1)
		}
	}
	// Growing a table keeps its slot.
	if _, err := m.Allocate(2, 9); err != nil || m.Slot(2) != 1 {
		t.Fatalf("after growth: slot %d, err %v", m.Slot(2), err)
	}
	// A fourth sequence gets nothing, blocks included.
	free := m.FreeBlocks()
	if _, err := m.Allocate(4, 1); !errors.Is(err, ErrOutOfSlots) {
		t.Fatalf("fourth sequence: %v, want ErrOutOfSlots", err)
	}
	if m.FreeBlocks() != free || m.Table(4) != nil || m.Slot(4) != -1 || m.UsedSlots() != 3 {
		t.Fatalf("failed allocation left state: free %d/%d table %v slot %d", m.FreeBlocks(), free, m.Table(4), m.Slot(4))
	}
	// Freeing releases the slot; the next sequence takes the lowest free.
	m.Free(2)
	if m.Slot(2) != -1 || m.UsedSlots() != 2 {
		t.Fatalf("freed sequence still holds slot %d", m.Slot(2))
	}
	if _, err := m.Allocate(4, 1); err != nil || m.Slot(4) != 1 {
		t.Fatalf("reuse: slot %d, err %v", m.Slot(4), err)
	}
	m.Free(1)
	m.Free(3)
	if _, err := m.Allocate(5, 1); err != nil || m.Slot(5) != 0 {
		t.Fatalf("lowest free: slot %d, err %v", m.Slot(5), err)
	}

	// New leaves slots unbounded.
	u := mustNew(t, 8, 4)
	for s := SeqID(1); s <= 8; s++ {
		if _, err := u.Allocate(s, 1); err != nil || u.Slot(s) != int(s)-1 {
			t.Fatalf("unbounded: sequence %d slot %d err %v", s, u.Slot(s), err)
		}
	}
}
