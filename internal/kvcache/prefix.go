package kvcache

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Automatic prefix caching, in the shape of vLLM's.
//
// A block's KV depends on its tokens and on every token before it (and on
// nothing else: positions follow from the block's index). So a full block
// is named by a hash chain: hash(block i) = H(hash(block i-1), tokens of
// block i). Two sequences whose first n blocks have the same tokens have
// the same first n hashes, and the KV one of them computed for those
// blocks is exactly what the other would compute.
//
// Lifecycle of a block with prefix caching on:
//   - free: on the free list, no table holds it, no hash.
//   - held: in one or more tables (refs > 0), registered or not.
//   - idle: registered, no table holds it; kept on an LRU list for a later
//     hit. Allocation takes free blocks first and evicts idle ones (least
//     recently released first) only when the free list is empty.
//
// A block is registered by Commit once all its tokens are computed, never
// before: its KV is then final, and any number of sequences may read it.
// Nobody writes it again until it is evicted. The partially filled last
// block of a sequence is never registered, so the block a sequence writes
// next is always one it holds alone (CheckWritable asserts it).
//
// H is SHA-256 rather than a fast 64-bit hash because a collision would
// hand one request another's KV: with a weak hash a client could craft
// colliding prompts (vLLM moved to SHA-256 for that reason). At ~100 bytes
// per block it costs well under a microsecond per 16 tokens.

// BlockHash names a full block by its tokens and all tokens before it.
type BlockHash [sha256.Size]byte

// rootHash is the parent of a sequence's first block.
var rootHash = BlockHash(sha256.Sum256([]byte("mlxcel kvcache prefix v1")))

// HashBlocks extends hashes, the chain of the first len(hashes) full
// blocks of tokens, to every full block of tokens (len(tokens)/blockSize
// of them) and returns it. Sequences only ever append tokens, so callers
// keep the slice and extend it as tokens are added: each block is hashed
// once.
func HashBlocks(hashes []BlockHash, tokens []int32, blockSize int) []BlockHash {
	n := len(tokens) / blockSize
	if len(hashes) >= n {
		return hashes
	}
	buf := make([]byte, sha256.Size+4*blockSize)
	for i := len(hashes); i < n; i++ {
		parent := rootHash
		if i > 0 {
			parent = hashes[i-1]
		}
		copy(buf, parent[:])
		for j, t := range tokens[i*blockSize : (i+1)*blockSize] {
			binary.LittleEndian.PutUint32(buf[sha256.Size+4*j:], uint32(t))
		}
		hashes = append(hashes, sha256.Sum256(buf))
	}
	return hashes
}

// prefixCache is the Manager's content-addressed table and LRU list of
// idle registered blocks (a doubly linked list threaded through per-block
// arrays, so a hit takes a block off it in O(1)).
type prefixCache struct {
	byHash map[BlockHash]int32
	hash   []BlockHash // hash[b] is valid while reg[b]
	reg    []bool

	prev, next []int32 // LRU links; -1 ends
	head, tail int32   // head: least recently released, evicted first
	lruLen     int
}

func newPrefixCache(numBlocks int) *prefixCache {
	pc := &prefixCache{
		byHash: map[BlockHash]int32{},
		hash:   make([]BlockHash, numBlocks),
		reg:    make([]bool, numBlocks),
		prev:   make([]int32, numBlocks),
		next:   make([]int32, numBlocks),
		head:   -1,
		tail:   -1,
	}
	return pc
}

func (pc *prefixCache) registered(b int32) bool { return pc.reg[b] }

func (pc *prefixCache) register(b int32, h BlockHash) {
	pc.reg[b], pc.hash[b] = true, h
	pc.byHash[h] = b
}

func (pc *prefixCache) lruPush(b int32) {
	pc.prev[b], pc.next[b] = pc.tail, -1
	if pc.tail >= 0 {
		pc.next[pc.tail] = b
	} else {
		pc.head = b
	}
	pc.tail = b
	pc.lruLen++
}

func (pc *prefixCache) lruRemove(b int32) {
	p, n := pc.prev[b], pc.next[b]
	if p >= 0 {
		pc.next[p] = n
	} else {
		pc.head = n
	}
	if n >= 0 {
		pc.prev[n] = p
	} else {
		pc.tail = p
	}
	pc.prev[b], pc.next[b] = -1, -1
	pc.lruLen--
}

// evict takes the least recently released idle block off the LRU list and
// drops its registration.
func (pc *prefixCache) evict() int32 {
	b := pc.head
	pc.lruRemove(b)
	delete(pc.byHash, pc.hash[b])
	pc.reg[b] = false
	pc.hash[b] = BlockHash{}
	return b
}

// PrefixCaching reports whether the manager keeps computed blocks for
// reuse.
func (m *Manager) PrefixCaching() bool { return m.pc != nil }

// CachedBlocks is the number of idle cached blocks: registered, held by no
// table, evictable. They count as free in FreeBlocks.
func (m *Manager) CachedBlocks() int {
	if m.pc == nil {
		return 0
	}
	return m.pc.lruLen
}

// RegisteredBlocks is the number of blocks in the prefix cache's table,
// held or idle.
func (m *Manager) RegisteredBlocks() int {
	if m.pc == nil {
		return 0
	}
	return len(m.pc.byHash)
}

// maxHit is how many leading blocks of a sequence of tokens tokens may be
// taken from the cache: at least its last token must be computed, because
// the step that computes it is the one that returns the logits to sample
// from. A sequence of exactly k full blocks therefore takes at most k-1.
func (m *Manager) maxHit(hashes []BlockHash, tokens int) int {
	if tokens <= 0 {
		return 0
	}
	return min(len(hashes), (tokens-1)/m.blockSize)
}

// Lookup reports how many leading blocks of a sequence of tokens tokens,
// whose full blocks hash to hashes, are cached (hit), and how many of those
// are idle (held by no table: mapping them takes them out of FreeBlocks).
// It changes nothing.
func (m *Manager) Lookup(hashes []BlockHash, tokens int) (hit, idle int) {
	if m.pc == nil {
		return 0, 0
	}
	hit = m.cachedRun(hashes, tokens)
	// With per-slot state the prefix must end where a snapshot was taken.
	for m.snaps != nil && hit > 0 && !m.snaps.has(hashes[hit-1]) {
		hit--
	}
	for _, h := range hashes[:hit] {
		if m.refs[m.pc.byHash[h]] == 0 {
			idle++
		}
	}
	return hit, idle
}

// cachedRun is how many leading blocks of the sequence are in the cache,
// snapshots aside.
func (m *Manager) cachedRun(hashes []BlockHash, tokens int) (n int) {
	for _, h := range hashes[:m.maxHit(hashes, tokens)] {
		if _, ok := m.pc.byHash[h]; !ok {
			break
		}
		n++
	}
	return n
}

// BranchPoint is, with snapshots, where the sequence's cached blocks end
// when no snapshot ends them there (0 otherwise): the point at which it
// leaves the prompt it shares them with. Its prefill should leave a
// snapshot there, so that the next prompt sharing those blocks (a common
// system prompt, a tool list) hits them: snapshots are otherwise taken at
// prompts' ends only, which prompts that differ after a shared prefix
// never reach. vLLM and SGLang checkpoint hybrid models' state at such
// branch points too.
func (m *Manager) BranchPoint(hashes []BlockHash, tokens int) int {
	if m.pc == nil || m.snaps == nil {
		return 0
	}
	run := m.cachedRun(hashes, tokens)
	if hit, _ := m.Lookup(hashes, tokens); run > hit {
		return run * m.blockSize
	}
	return 0
}

// NeededCached is how many blocks AllocateCached(seq, hashes, tokens)
// would take out of FreeBlocks for a sequence without a table (new blocks
// plus idle cached ones it maps), and how many leading blocks it would map
// from the cache. Cached blocks other sequences hold cost nothing.
func (m *Manager) NeededCached(hashes []BlockHash, tokens int) (need, hit int) {
	hit, idle := m.Lookup(hashes, tokens)
	return m.BlocksFor(tokens) - hit + idle, hit
}

// AllocateCached creates seq's table for a sequence of tokens tokens whose
// full blocks hash to hashes: the longest cached prefix (Lookup) is mapped
// from the cache, shared with whoever else holds it, and the rest is
// allocated as Allocate does. It returns the number of leading tokens whose
// KV is already there (a multiple of the block size, less than tokens).
// All-or-nothing like Allocate. Without prefix caching it is Allocate.
func (m *Manager) AllocateCached(seq SeqID, hashes []BlockHash, tokens int) (cached int, err error) {
	if m.pc == nil {
		_, err := m.Allocate(seq, tokens)
		return 0, err
	}
	if m.tables[seq] != nil {
		return 0, fmt.Errorf("kvcache: sequence %d already holds a table", seq)
	}
	need, hit := m.NeededCached(hashes, tokens)
	if need > m.FreeBlocks() {
		return 0, fmt.Errorf("%w: sequence %d needs %d, %d free", ErrOutOfBlocks, seq, need, m.FreeBlocks())
	}
	t, err := m.tableFor(seq)
	if err != nil {
		return 0, err
	}
	for _, h := range hashes[:hit] {
		b := m.pc.byHash[h]
		if m.refs[b] == 0 {
			m.pc.lruRemove(b) // idle until now: no longer evictable
		}
		m.refs[b]++
		t.blocks = append(t.blocks, b)
	}
	t.committed = hit
	for len(t.blocks) < m.BlocksFor(tokens) {
		t.blocks = append(t.blocks, m.take())
	}
	return hit * m.blockSize, nil
}

// Commit registers seq's blocks named by hashes (hashes[i] names table
// block i) in the prefix cache. The caller passes the hashes of full
// blocks whose KV is computed, and nothing beyond: a registered block is
// read by other sequences as it is. A block whose hash is already
// registered under another block (both sequences computed the same prefix
// at once) stays unregistered and is freed normally. Blocks committed
// before are skipped, so calling it every step costs only the new blocks.
// It returns the number of blocks newly registered.
func (m *Manager) Commit(seq SeqID, hashes []BlockHash) int {
	t := m.tables[seq]
	if t == nil || m.pc == nil {
		return 0
	}
	n := min(len(hashes), len(t.blocks))
	added := 0
	for i := t.committed; i < n; i++ {
		b, h := t.blocks[i], hashes[i]
		if m.pc.reg[b] {
			if m.pc.hash[b] != h {
				// A hit mapped under a different prefix, or hashes that
				// do not belong to this sequence: its output would be
				// wrong. Never continue past that.
				panic(fmt.Sprintf("kvcache: sequence %d block %d (table index %d) is registered under another hash", seq, b, i))
			}
			continue
		}
		if _, dup := m.pc.byHash[h]; dup {
			continue
		}
		m.pc.register(b, h)
		added++
	}
	t.committed = max(t.committed, n)
	return added
}

// CheckWritable returns an error unless every block holding positions
// [from, to) of seq is held by seq alone and not registered in the prefix
// cache: the only blocks a step may write KV into. The scheduler calls it
// for every chunk it plans.
func (m *Manager) CheckWritable(seq SeqID, from, to int) error {
	t := m.tables[seq]
	if t == nil || from >= to {
		return nil
	}
	if (to-1)/m.blockSize >= len(t.blocks) {
		return fmt.Errorf("kvcache: sequence %d writes position %d beyond its %d blocks", seq, to-1, len(t.blocks))
	}
	for i := from / m.blockSize; i <= (to-1)/m.blockSize; i++ {
		b := t.blocks[i]
		if !m.Writable(b) {
			return fmt.Errorf("kvcache: sequence %d would write positions [%d,%d) into block %d (table index %d), which is shared (%d holders) or cached", seq, from, to, b, i, m.refs[b])
		}
	}
	return nil
}

// Writable reports whether KV may be written into block b: exactly one
// table holds it and it is not registered in the prefix cache. Backends or
// test models can assert it for every row they store.
func (m *Manager) Writable(b int32) bool {
	return b >= 0 && int(b) < m.numBlocks && m.refs[b] == 1 && (m.pc == nil || !m.pc.reg[b])
}

// CheckInvariants verifies the bookkeeping (for tests; O(blocks)): every
// block is exactly one of free, idle-cached or held; reference counts equal
// the tables that list the block; no table lists a block twice; the hash
// table, the registration flags and the LRU list agree; slots match tables.
func (m *Manager) CheckInvariants() error {
	refs := make([]int32, m.numBlocks)
	for seq, t := range m.tables {
		seen := map[int32]bool{}
		for _, b := range t.blocks {
			if seen[b] {
				return fmt.Errorf("sequence %d lists block %d twice", seq, b)
			}
			seen[b] = true
			refs[b]++
		}
		if t.slot < 0 || t.slot >= len(m.slotUsed) || !m.slotUsed[t.slot] {
			return fmt.Errorf("sequence %d: slot %d not held", seq, t.slot)
		}
	}
	state := make([]byte, m.numBlocks) // 0 unseen, 'f' free, 'l' LRU
	for _, b := range m.free {
		if state[b] != 0 {
			return fmt.Errorf("block %d on the free list twice", b)
		}
		state[b] = 'f'
		if m.pc != nil && m.pc.reg[b] {
			return fmt.Errorf("free block %d is registered", b)
		}
	}
	used := 0
	for _, u := range m.slotUsed {
		if u {
			used++
		}
	}
	if used != len(m.tables) {
		return fmt.Errorf("%d slots held by %d tables", used, len(m.tables))
	}
	if m.pc != nil {
		n, prev := 0, int32(-1)
		for b := m.pc.head; b >= 0; b = m.pc.next[b] {
			if state[b] != 0 || n > m.numBlocks {
				return fmt.Errorf("block %d on the LRU list and elsewhere (state %q)", b, state[b])
			}
			if m.pc.prev[b] != prev {
				return fmt.Errorf("LRU links broken at block %d", b)
			}
			if !m.pc.reg[b] {
				return fmt.Errorf("LRU block %d is not registered", b)
			}
			state[b], prev, n = 'l', b, n+1
		}
		if n != m.pc.lruLen || prev != m.pc.tail {
			return fmt.Errorf("LRU list has %d blocks, length says %d", n, m.pc.lruLen)
		}
		reg := 0
		for b, r := range m.pc.reg {
			if !r {
				continue
			}
			reg++
			if got, ok := m.pc.byHash[m.pc.hash[b]]; !ok || got != int32(b) {
				return fmt.Errorf("registered block %d is not in the hash table", b)
			}
		}
		if reg != len(m.pc.byHash) {
			return fmt.Errorf("%d registered blocks, hash table has %d", reg, len(m.pc.byHash))
		}
	}
	for b := range m.numBlocks {
		switch {
		case refs[b] != m.refs[b]:
			return fmt.Errorf("block %d: %d tables list it, reference count %d", b, refs[b], m.refs[b])
		case refs[b] > 0 && state[b] != 0:
			return fmt.Errorf("block %d is held and also %q", b, state[b])
		case refs[b] == 0 && state[b] == 0:
			return fmt.Errorf("block %d is neither held, free nor cached (leaked)", b)
		}
	}
	return nil
}
