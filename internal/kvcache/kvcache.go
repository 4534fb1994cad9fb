// Package kvcache is the bookkeeping half of the paged KV cache: which
// fixed-size blocks of the backend's KVStore belong to which sequence.
//
// It never touches tensors. A block id returned here indexes the
// backend.KVStore created with backend.KVSpec{NumBlocks, BlockSize, ...};
// a sequence's block table lists its blocks in position order, so token at
// position p lives in block table[p/BlockSize] at offset p%BlockSize.
//
// Every sequence holding a table also holds a slot: a small index, stable
// until the sequence is freed, that no other sequence holds meanwhile. It
// picks the sequence's ring for sliding-window layers, whose KV is kept per
// slot instead of per block (backend.KVSpec Slots/RingTokens, SeqSlice.Slot;
// see docs/kv-cache.md). Tying the slot to the table makes its lifetime the
// sequence's admission exactly: taken on the first Allocate, released by
// Free (finish, cancel or preemption).
//
// The Manager is not safe for concurrent use: the engine's single loop
// goroutine owns it, which is also the only goroutine that builds batches.
//
// TODO(prefix-cache): share full blocks between sequences with identical
// prompt prefixes (hash of the block's tokens chained with the previous
// block's hash, refcounted blocks, an LRU of unreferenced cached blocks that
// are reclaimed before the free list runs dry). Not done yet: every
// sequence owns its blocks exclusively.
package kvcache

import (
	"errors"
	"fmt"
)

// DefaultBlockSize is the number of token slots per block when none is given.
const DefaultBlockSize = 16

// SeqID names a sequence; the engine assigns them.
type SeqID uint64

// ErrOutOfBlocks is returned when an allocation needs more free blocks than
// remain. Nothing is allocated in that case.
var ErrOutOfBlocks = errors.New("kvcache: out of KV blocks")

// ErrOutOfSlots is returned when a sequence without a table would need a
// slot and all of them are held. Nothing is allocated in that case.
var ErrOutOfSlots = errors.New("kvcache: out of sequence slots")

// Manager hands out blocks from a free list and keeps per-sequence block
// tables.
type Manager struct {
	blockSize int
	numBlocks int
	// free is a LIFO stack: a just-freed block is reused first, which keeps
	// the working set of KV memory small and hot in caches.
	free []int32
	// owned[b] and owner[b] say whether and by which sequence block b is
	// held; they make a double free or a double allocation detectable.
	owner  []SeqID
	owned  []bool
	tables map[SeqID]*table
	// slotUsed[i] says whether slot i is held; maxSlots bounds its length
	// (0: unbounded).
	slotUsed []bool
	maxSlots int
}

type table struct {
	blocks []int32
	slot   int
}

// New creates a manager of numBlocks blocks of blockSize token slots.
// blockSize <= 0 selects DefaultBlockSize. Sequence slots are unbounded.
func New(numBlocks, blockSize int) (*Manager, error) {
	return NewWithSlots(numBlocks, blockSize, 0)
}

// NewWithSlots is New with at most slots sequences holding a table at once
// (0: unbounded); Allocate fails with ErrOutOfSlots beyond that.
func NewWithSlots(numBlocks, blockSize, slots int) (*Manager, error) {
	if slots < 0 {
		return nil, fmt.Errorf("kvcache: negative slot count %d", slots)
	}
	if blockSize <= 0 {
		blockSize = DefaultBlockSize
	}
	if numBlocks <= 0 {
		return nil, fmt.Errorf("kvcache: need at least one block, got %d", numBlocks)
	}
	m := &Manager{
		blockSize: blockSize,
		numBlocks: numBlocks,
		free:      make([]int32, numBlocks),
		owner:     make([]SeqID, numBlocks),
		owned:     make([]bool, numBlocks),
		tables:    map[SeqID]*table{},
		maxSlots:  slots,
	}
	// Push in reverse so block 0 is handed out first: deterministic and
	// easy to read in tests and debug dumps.
	for i := range m.free {
		m.free[i] = int32(numBlocks - 1 - i)
	}
	return m, nil
}

// BlockSize is the number of token slots per block.
func (m *Manager) BlockSize() int { return m.blockSize }

// NumBlocks is the total number of blocks.
func (m *Manager) NumBlocks() int { return m.numBlocks }

// FreeBlocks is the number of blocks on the free list.
func (m *Manager) FreeBlocks() int { return len(m.free) }

// UsedBlocks is the number of blocks held by sequences.
func (m *Manager) UsedBlocks() int { return m.numBlocks - len(m.free) }

// Usage is the fraction of blocks in use, 0..1.
func (m *Manager) Usage() float64 {
	return float64(m.UsedBlocks()) / float64(m.numBlocks)
}

// NumSeqs is the number of sequences holding a block table.
func (m *Manager) NumSeqs() int { return len(m.tables) }

// Capacity is the number of tokens all blocks together can hold.
func (m *Manager) Capacity() int { return m.numBlocks * m.blockSize }

// BlocksFor is the number of blocks needed to hold tokens tokens.
func (m *Manager) BlocksFor(tokens int) int {
	if tokens <= 0 {
		return 0
	}
	return (tokens + m.blockSize - 1) / m.blockSize
}

// CanAdmit reports whether a new sequence of tokens tokens would fit in the
// free blocks right now.
func (m *Manager) CanAdmit(tokens int) bool {
	return m.BlocksFor(tokens) <= len(m.free)
}

// Needed is how many more blocks seq needs for its table to cover tokens
// tokens (0 when it already does).
func (m *Manager) Needed(seq SeqID, tokens int) int {
	have := 0
	if t := m.tables[seq]; t != nil {
		have = len(t.blocks)
	}
	if n := m.BlocksFor(tokens) - have; n > 0 {
		return n
	}
	return 0
}

// Allocate grows seq's block table until it covers tokens tokens in total
// (not tokens more): calling it again with the same or a smaller count is a
// no-op, so callers simply pass the length they are about to compute up to.
// It is all-or-nothing: on ErrOutOfBlocks the table is unchanged. The
// returned table is the manager's own slice; it stays valid (never
// rewritten in place) until seq is freed, and callers must not modify it.
func (m *Manager) Allocate(seq SeqID, tokens int) ([]int32, error) {
	need := m.Needed(seq, tokens)
	if need > len(m.free) {
		return m.Table(seq), fmt.Errorf("%w: sequence %d needs %d more, %d free", ErrOutOfBlocks, seq, need, len(m.free))
	}
	t := m.tables[seq]
	if t == nil {
		slot := m.takeSlot()
		if slot < 0 {
			return nil, fmt.Errorf("%w: all %d are held", ErrOutOfSlots, m.maxSlots)
		}
		t = &table{slot: slot}
		m.tables[seq] = t
	}
	for range need {
		b := m.free[len(m.free)-1]
		m.free = m.free[:len(m.free)-1]
		if m.owned[b] {
			// The free list and ownership disagree: memory of another
			// sequence would be overwritten. Never continue past that.
			panic(fmt.Sprintf("kvcache: block %d on the free list but owned by sequence %d", b, m.owner[b]))
		}
		m.owned[b], m.owner[b] = true, seq
		// Appending may move the backing array; previously returned
		// slices keep pointing at the old, still-correct prefix.
		t.blocks = append(t.blocks, b)
	}
	return t.blocks, nil
}

// takeSlot marks the lowest free slot held and returns it, or -1 when all
// maxSlots are held. Lowest-first keeps slot numbers small and the
// assignment deterministic (the slot count is the parallelism, so the scan
// is short).
func (m *Manager) takeSlot() int {
	for i, used := range m.slotUsed {
		if !used {
			m.slotUsed[i] = true
			return i
		}
	}
	if m.maxSlots > 0 && len(m.slotUsed) >= m.maxSlots {
		return -1
	}
	m.slotUsed = append(m.slotUsed, true)
	return len(m.slotUsed) - 1
}

// Slot is seq's slot, or -1 when it holds no table.
func (m *Manager) Slot(seq SeqID) int {
	if t := m.tables[seq]; t != nil {
		return t.slot
	}
	return -1
}

// UsedSlots is the number of slots held (one per sequence with a table).
func (m *Manager) UsedSlots() int { return len(m.tables) }

// Table is seq's block table (nil when it has none). See Allocate for the
// slice's lifetime.
func (m *Manager) Table(seq SeqID) []int32 {
	if t := m.tables[seq]; t != nil {
		return t.blocks
	}
	return nil
}

// Free returns all of seq's blocks to the free list, releases its slot and
// forgets its table.
// Freeing a sequence that holds nothing is a no-op, so a block can never be
// freed twice. It returns the number of blocks released.
func (m *Manager) Free(seq SeqID) int {
	t := m.tables[seq]
	if t == nil {
		return 0
	}
	delete(m.tables, seq)
	if !m.slotUsed[t.slot] {
		panic(fmt.Sprintf("kvcache: sequence %d frees slot %d that is not held", seq, t.slot))
	}
	m.slotUsed[t.slot] = false
	// Push in reverse so the sequence's first block is reused first.
	for i := len(t.blocks) - 1; i >= 0; i-- {
		b := t.blocks[i]
		if !m.owned[b] || m.owner[b] != seq {
			panic(fmt.Sprintf("kvcache: sequence %d frees block %d it does not own", seq, b))
		}
		m.owned[b] = false
		m.owner[b] = 0
		m.free = append(m.free, b)
	}
	return len(t.blocks)
}
