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
// Prefix caching (optional, NewWithOptions): a full block whose KV has been
// computed can be registered under a hash of its tokens chained with the
// hash of every block before it (prefix.go). A later sequence whose tokens
// start with the same blocks maps those blocks into its own table instead
// of computing them again, so blocks are reference counted: a block is
// free (on the free list), cached and idle (on the evictable LRU list, its
// KV kept for a later hit), or held by one or more tables. Registered
// blocks are read-only; a sequence only ever writes blocks it holds alone
// and that are not registered (CheckWritable).
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
	// the working set of KV memory small and hot in caches. It holds only
	// blocks that no table holds and that are not registered in the prefix
	// cache.
	free []int32
	// refs[b] is the number of tables holding block b. Without prefix
	// caching it is 0 or 1; a mismatch with the free list (a double free or
	// a double allocation) panics instead of letting one sequence overwrite
	// another's KV.
	refs   []int32
	tables map[SeqID]*table
	// slotUsed[i] says whether slot i is held; maxSlots bounds its length
	// (0: unbounded).
	slotUsed []bool
	maxSlots int

	// Prefix cache (nil when disabled; see prefix.go) and its per-slot
	// state snapshots (nil unless Options.Snapshots; snapshot.go).
	pc    *prefixCache
	snaps *snapshots
}

type table struct {
	blocks []int32
	slot   int
	// committed is how many leading blocks have been offered to the prefix
	// cache (registered, or found already registered under another block),
	// so Commit only hashes the new ones.
	committed int
}

// Options configure a Manager beyond its size.
type Options struct {
	// Slots bounds the sequences holding a table at once (0: unbounded);
	// Allocate fails with ErrOutOfSlots beyond that.
	Slots int
	// PrefixCache keeps computed full blocks for reuse by later sequences
	// with the same leading tokens (prefix.go).
	PrefixCache bool
	// Snapshots, with PrefixCache, is how many per-slot state snapshots
	// the KV store keeps (snapshot.go): a prefix is then found only up to
	// a block boundary that has one. 0: blocks alone make a hit.
	Snapshots int
}

// New creates a manager of numBlocks blocks of blockSize token slots.
// blockSize <= 0 selects DefaultBlockSize. Sequence slots are unbounded.
func New(numBlocks, blockSize int) (*Manager, error) {
	return NewWithOptions(numBlocks, blockSize, Options{})
}

// NewWithSlots is New with at most slots sequences holding a table at once
// (0: unbounded); Allocate fails with ErrOutOfSlots beyond that.
func NewWithSlots(numBlocks, blockSize, slots int) (*Manager, error) {
	return NewWithOptions(numBlocks, blockSize, Options{Slots: slots})
}

// NewWithOptions is New with slots and prefix caching as o says.
func NewWithOptions(numBlocks, blockSize int, o Options) (*Manager, error) {
	if o.Slots < 0 || o.Snapshots < 0 {
		return nil, fmt.Errorf("kvcache: negative slot count %d or snapshot count %d", o.Slots, o.Snapshots)
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
		refs:      make([]int32, numBlocks),
		tables:    map[SeqID]*table{},
		maxSlots:  o.Slots,
	}
	// Push in reverse so block 0 is handed out first: deterministic and
	// easy to read in tests and debug dumps.
	for i := range m.free {
		m.free[i] = int32(numBlocks - 1 - i)
	}
	if o.PrefixCache {
		m.pc = newPrefixCache(numBlocks)
		if o.Snapshots > 0 {
			m.snaps = newSnapshots(o.Snapshots)
		}
	}
	return m, nil
}

// BlockSize is the number of token slots per block.
func (m *Manager) BlockSize() int { return m.blockSize }

// NumBlocks is the total number of blocks.
func (m *Manager) NumBlocks() int { return m.numBlocks }

// FreeBlocks is the number of blocks an allocation can take: the free list
// plus the cached blocks no table holds (evicted on demand, oldest first).
func (m *Manager) FreeBlocks() int { return len(m.free) + m.CachedBlocks() }

// UsedBlocks is the number of blocks held by sequences (a block shared by
// several sequences counts once).
func (m *Manager) UsedBlocks() int { return m.numBlocks - m.FreeBlocks() }

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
// free blocks right now (not counting prefix-cache hits; see NeededCached).
func (m *Manager) CanAdmit(tokens int) bool {
	return m.BlocksFor(tokens) <= m.FreeBlocks()
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
	if need > m.FreeBlocks() {
		return m.Table(seq), fmt.Errorf("%w: sequence %d needs %d more, %d free", ErrOutOfBlocks, seq, need, m.FreeBlocks())
	}
	t, err := m.tableFor(seq)
	if err != nil {
		return nil, err
	}
	for range need {
		// Appending may move the backing array; previously returned
		// slices keep pointing at the old, still-correct prefix.
		t.blocks = append(t.blocks, m.take())
	}
	return t.blocks, nil
}

// tableFor is seq's table, created with a slot when it has none.
func (m *Manager) tableFor(seq SeqID) (*table, error) {
	if t := m.tables[seq]; t != nil {
		return t, nil
	}
	slot := m.takeSlot()
	if slot < 0 {
		return nil, fmt.Errorf("%w: all %d are held", ErrOutOfSlots, m.maxSlots)
	}
	t := &table{slot: slot}
	m.tables[seq] = t
	return t, nil
}

// take hands out one unreferenced block with a reference count of 1: from
// the free list while it has blocks, else the least recently used idle
// cached block, whose registration is dropped (evicted). The caller has
// checked FreeBlocks.
func (m *Manager) take() int32 {
	var b int32
	if n := len(m.free); n > 0 {
		b = m.free[n-1]
		m.free = m.free[:n-1]
		if m.pc != nil && m.pc.registered(b) {
			panic(fmt.Sprintf("kvcache: block %d on the free list but registered in the prefix cache", b))
		}
	} else {
		if m.pc == nil || m.pc.lruLen == 0 {
			panic("kvcache: take with no free block")
		}
		b = m.pc.evict()
	}
	if m.refs[b] != 0 {
		// The free list and the tables disagree: memory of another
		// sequence would be overwritten. Never continue past that.
		panic(fmt.Sprintf("kvcache: free block %d is held by %d tables", b, m.refs[b]))
	}
	m.refs[b] = 1
	return b
}

// release drops one table's reference to b; an unreferenced block goes to
// the prefix cache's LRU list when registered there, else to the free list.
func (m *Manager) release(b int32) {
	if m.refs[b] <= 0 {
		panic(fmt.Sprintf("kvcache: block %d released more often than held", b))
	}
	m.refs[b]--
	if m.refs[b] > 0 {
		return
	}
	if m.pc != nil && m.pc.registered(b) {
		m.pc.lruPush(b)
		return
	}
	m.free = append(m.free, b)
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

// Free drops seq's references to its blocks, releases its slot and forgets
// its table. A block nobody holds any more returns to the free list, or,
// when registered in the prefix cache, to the tail of its LRU list, where
// it stays reusable until evicted.
// Freeing a sequence that holds nothing is a no-op, so a block can never be
// released twice. It returns the number of blocks in the table.
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
	// Release in reverse: on the free list (a stack) the sequence's first
	// block is then reused first; on the LRU list its last block becomes
	// the oldest, so eviction eats a cached prefix from its end and the
	// shorter prefix stays usable longer (as vLLM does).
	for i := len(t.blocks) - 1; i >= 0; i-- {
		m.release(t.blocks[i])
	}
	return len(t.blocks)
}
