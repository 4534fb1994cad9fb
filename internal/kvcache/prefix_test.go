package kvcache

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func mustPrefix(t *testing.T, blocks, size, slots int) *Manager {
	t.Helper()
	m, err := NewWithOptions(blocks, size, Options{Slots: slots, PrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func check(t *testing.T, m *Manager) {
	t.Helper()
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func toks(n, salt int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*7 + salt*13) % 101)
	}
	return p
}

// admit maps tokens' cached prefix for seq, allocates the rest and commits
// every full block as if the whole sequence had been computed.
func admit(t *testing.T, m *Manager, seq SeqID, tokens []int32) (cached int) {
	t.Helper()
	h := HashBlocks(nil, tokens, m.BlockSize())
	cached, err := m.AllocateCached(seq, h, len(tokens))
	if err != nil {
		t.Fatal(err)
	}
	m.Commit(seq, h)
	return cached
}

func TestHashChain(t *testing.T) {
	const bs = 4
	a := toks(18, 1)
	h := HashBlocks(nil, a, bs)
	if len(h) != 4 {
		t.Fatalf("%d hashes for 18 tokens of blocks of 4, want 4 (the partial block is not hashed)", len(h))
	}
	// Extending block by block gives the same chain as one call.
	var inc []BlockHash
	for n := 0; n <= len(a); n++ {
		inc = HashBlocks(inc, a[:n], bs)
	}
	if !slices.Equal(inc, h) {
		t.Fatal("incremental hashes differ")
	}
	// Same prefix, different tail: the shared blocks hash the same.
	b := slices.Clone(a)
	b[9] = 99 // block 2
	hb := HashBlocks(nil, b, bs)
	if !slices.Equal(hb[:2], h[:2]) || hb[2] == h[2] || hb[3] == h[3] {
		t.Fatal("a change in block 2 must change blocks 2 and 3 and nothing before")
	}
	// The same tokens after a different prefix hash differently: the
	// chain carries the whole history (and so the position).
	c := slices.Clone(a)
	c[0]++
	hc := HashBlocks(nil, c, bs)
	for i := range h {
		if hc[i] == h[i] {
			t.Fatalf("block %d hashes the same after a different first block", i)
		}
	}
	// Repeated identical blocks still differ by position.
	rep := make([]int32, 8)
	hr := HashBlocks(nil, rep, bs)
	if hr[0] == hr[1] {
		t.Fatal("identical blocks at different positions share a hash")
	}
}

func TestPrefixSharingAndRefcounts(t *testing.T) {
	m := mustPrefix(t, 16, 4, 0)
	p := toks(14, 1) // 3 full blocks + 2 tokens
	if c := admit(t, m, 1, p); c != 0 {
		t.Fatalf("cold cache hit %d tokens", c)
	}
	if m.RegisteredBlocks() != 3 || m.CachedBlocks() != 0 || m.UsedBlocks() != 4 {
		t.Fatalf("registered %d cached %d used %d", m.RegisteredBlocks(), m.CachedBlocks(), m.UsedBlocks())
	}
	// Same 12-token prefix, different tail: 3 blocks shared, 1 new.
	q := append(slices.Clone(p[:12]), 50, 51, 52, 53, 54)
	h := HashBlocks(nil, q, 4)
	need, hit := m.NeededCached(h, len(q))
	if hit != 3 || need != 2 {
		t.Fatalf("NeededCached = %d, %d; want need 2 (blocks 3,4), hit 3", need, hit)
	}
	cached, err := m.AllocateCached(2, h, len(q))
	if err != nil || cached != 12 {
		t.Fatalf("cached %d err %v", cached, err)
	}
	ta, tb := m.Table(1), m.Table(2)
	if !slices.Equal(ta[:3], tb[:3]) || ta[3] == tb[3] {
		t.Fatalf("tables %v %v: want the first 3 shared, the rest distinct", ta, tb)
	}
	for _, b := range ta[:3] {
		if m.refs[b] != 2 {
			t.Fatalf("shared block %d refs %d", b, m.refs[b])
		}
	}
	// Writes go only to exclusively held, unregistered blocks.
	if err := m.CheckWritable(2, 12, 17); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckWritable(2, 11, 13); err == nil {
		t.Fatal("writing position 11 (a shared block) was allowed")
	}
	if err := m.CheckWritable(1, 12, 14); err != nil {
		t.Fatal(err) // sequence 1's partial block is its own
	}
	check(t, m)

	// Freeing one holder keeps the shared blocks held by the other.
	m.Free(1)
	if m.CachedBlocks() != 0 || m.UsedBlocks() != 5 {
		t.Fatalf("after freeing 1: cached %d used %d", m.CachedBlocks(), m.UsedBlocks())
	}
	check(t, m)
	m.Free(2)
	// Sequence 2 never committed its block 3 (full: 16 tokens of 17), so
	// only the 3 shared blocks are cached.
	if m.CachedBlocks() != 3 || m.UsedBlocks() != 0 || m.FreeBlocks() != 16 {
		t.Fatalf("after freeing 2: cached %d used %d free %d", m.CachedBlocks(), m.UsedBlocks(), m.FreeBlocks())
	}
	check(t, m)
}

// The last token is always computed: a sequence of exactly k full blocks
// maps at most k-1 of them.
func TestHitLeavesLastTokenToCompute(t *testing.T) {
	m := mustPrefix(t, 16, 4, 0)
	p := toks(12, 2)
	admit(t, m, 1, p)
	m.Free(1)
	h := HashBlocks(nil, p, 4)
	if hit, idle := m.Lookup(h, 12); hit != 2 || idle != 2 {
		t.Fatalf("Lookup = %d, %d; want 2, 2", hit, idle)
	}
	if hit, _ := m.Lookup(h, 13); hit != 3 {
		t.Fatalf("one more token: hit %d, want 3", hit)
	}
	if c := admit(t, m, 2, p); c != 8 {
		t.Fatalf("cached %d, want 8", c)
	}
	// The recomputed block 2 duplicates the idle cached one: it stays
	// unregistered and goes back to the free list.
	free := len(m.free)
	m.Free(2)
	if len(m.free) != free+1 || m.CachedBlocks() != 3 {
		t.Fatalf("free list %d -> %d, cached %d", free, len(m.free), m.CachedBlocks())
	}
	check(t, m)
}

// Idle cached blocks are evicted only when the free list is empty, least
// recently released first and, within a sequence, from its last block.
func TestLRUEvictionOrder(t *testing.T) {
	m := mustPrefix(t, 8, 2, 0)
	a, b := toks(7, 1), toks(7, 2) // 3 full blocks + 1 token each
	admit(t, m, 1, a)
	admit(t, m, 2, b)
	ta, tb := slices.Clone(m.Table(1)), slices.Clone(m.Table(2))
	m.Free(1) // a's blocks released first: oldest
	m.Free(2)
	if m.CachedBlocks() != 6 || len(m.free) != 2 {
		t.Fatalf("cached %d free %d", m.CachedBlocks(), len(m.free))
	}
	// Order of eviction: a2 a1 a0 b2 b1 b0, after the 2 free blocks.
	want := []int32{ta[2], ta[1], ta[0], tb[2], tb[1], tb[0]}
	got, err := m.Allocate(9, 2*8)
	if err != nil {
		t.Fatal(err)
	}
	var evicted []int32
	for _, blk := range got {
		if blk != ta[3] && blk != tb[3] {
			evicted = append(evicted, blk)
		}
	}
	if !slices.Equal(evicted, want) {
		t.Fatalf("evicted %v, want %v (free blocks %d %d first)", evicted, want, ta[3], tb[3])
	}
	if got[0] != tb[3] && got[0] != ta[3] {
		t.Fatalf("first block %d should come from the free list", got[0])
	}
	if m.RegisteredBlocks() != 0 {
		t.Fatalf("%d blocks still registered after eviction", m.RegisteredBlocks())
	}
	check(t, m)
}

// A hit takes an idle block off the LRU list, so eviction passes it over;
// released again it becomes the most recent.
func TestReuseAfterFreeRefreshesLRU(t *testing.T) {
	m := mustPrefix(t, 6, 2, 0)
	a, b := toks(5, 1), toks(5, 2) // 2 full blocks + 1 each
	admit(t, m, 1, a)
	admit(t, m, 2, b)
	m.Free(1)
	m.Free(2)
	// a's blocks are older; a hit refreshes them.
	if c := admit(t, m, 3, a); c != 4 {
		t.Fatalf("cached %d, want 4", c)
	}
	m.Free(3)
	// Now b's are the oldest: a request needing 3 fresh blocks evicts
	// b's two (after the free ones).
	free := len(m.free)
	if _, err := m.Allocate(4, 2*(free+2)); err != nil {
		t.Fatal(err)
	}
	hb := HashBlocks(nil, b, 2)
	ha := HashBlocks(nil, a, 2)
	if hit, _ := m.Lookup(hb, 5); hit != 0 {
		t.Fatalf("b still hits %d blocks", hit)
	}
	if hit, _ := m.Lookup(ha, 5); hit != 2 {
		t.Fatalf("a hits %d blocks, want 2", hit)
	}
	check(t, m)
}

func TestAllocateCachedAllOrNothing(t *testing.T) {
	m := mustPrefix(t, 6, 2, 2)
	p := toks(9, 1)
	admit(t, m, 1, p) // 5 blocks, 4 registered
	h := HashBlocks(nil, p, 2)
	// Sequence 2 shares 4 blocks and needs one more: only 1 free.
	if c, err := m.AllocateCached(2, h, 9); err != nil || c != 8 {
		t.Fatalf("cached %d err %v", c, err)
	}
	// A third sequence would hit 4 but needs 2 new blocks; 0 are free.
	q := append(slices.Clone(p[:8]), 1, 2, 3)
	hq := HashBlocks(nil, q, 2)
	before := len(m.free)
	if _, err := m.AllocateCached(3, hq, len(q)); !errors.Is(err, ErrOutOfSlots) && !errors.Is(err, ErrOutOfBlocks) {
		t.Fatalf("err %v", err)
	}
	if m.Table(3) != nil || len(m.free) != before || m.refs[m.Table(1)[0]] != 2 {
		t.Fatal("a failed AllocateCached changed state")
	}
	if _, err := m.AllocateCached(2, h, 9); err == nil {
		t.Fatal("AllocateCached for a sequence with a table should fail")
	}
	m.Free(2)
	// Slots: 2 held max; 1 and 3 are fine, a third one fails cleanly.
	if _, err := m.AllocateCached(3, hq, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AllocateCached(4, nil, 1); !errors.Is(err, ErrOutOfSlots) && !errors.Is(err, ErrOutOfBlocks) {
		t.Fatalf("err %v", err)
	}
	check(t, m)
}

func TestCommitRejectsForeignHash(t *testing.T) {
	m := mustPrefix(t, 8, 2, 0)
	p := toks(5, 1)
	admit(t, m, 1, p)
	admit(t, m, 2, p) // shares blocks 0,1 (registered by 1)
	defer func() {
		if recover() == nil {
			t.Fatal("committing other hashes over a registered block did not panic")
		}
	}()
	m.tables[2].committed = 0
	m.Commit(2, HashBlocks(nil, toks(5, 9), 2))
}

func TestPrefixCacheDisabled(t *testing.T) {
	m := mustNew(t, 8, 2)
	p := toks(9, 1)
	h := HashBlocks(nil, p, 2)
	if c, err := m.AllocateCached(1, h, 9); err != nil || c != 0 || len(m.Table(1)) != 5 {
		t.Fatalf("cached %d err %v table %v", c, err, m.Table(1))
	}
	if m.Commit(1, h) != 0 || m.RegisteredBlocks() != 0 || m.PrefixCaching() {
		t.Fatal("a manager without prefix caching registered blocks")
	}
	m.Free(1)
	if hit, _ := m.Lookup(h, 9); hit != 0 || m.FreeBlocks() != 8 || m.CachedBlocks() != 0 {
		t.Fatalf("hit %d free %d", hit, m.FreeBlocks())
	}
	check(t, m)
}

// TestPrefixChurn runs a random workload of sequences from a few prompt
// families (so prefixes are shared), computed chunk by chunk, growing,
// committing and freeing, on a cache small enough to evict constantly. A
// simulated KV store records which chain hash each block's content belongs
// to when a sequence writes it; every block a sequence maps from the cache
// must hold exactly the content it is mapped for, and every write must go
// to a block the sequence holds alone. The invariants hold at every step.
func TestPrefixChurn(t *testing.T) {
	const bs, blocks, slots = 4, 48, 6
	m := mustPrefix(t, blocks, bs, slots)
	rng := rand.New(rand.NewPCG(1, 2))
	content := make([]BlockHash, blocks) // what each block's KV is of
	type live struct {
		tokens   []int32
		hashes   []BlockHash
		computed int
	}
	seqs := map[SeqID]*live{}
	families := [][]int32{toks(40, 1), toks(40, 2), toks(40, 3)}
	next := SeqID(1)
	hits := 0
	for i := range 5000 {
		switch r := rng.IntN(10); {
		case r < 3 && len(seqs) < slots: // admit
			f := families[rng.IntN(len(families))]
			n := 1 + rng.IntN(len(f))
			tk := slices.Clone(f[:n])
			for range rng.IntN(10) {
				tk = append(tk, int32(rng.IntN(101)))
			}
			h := HashBlocks(nil, tk, bs)
			need, hit := m.NeededCached(h, len(tk))
			if need > m.FreeBlocks() {
				continue
			}
			cached, err := m.AllocateCached(next, h, len(tk))
			if err != nil {
				t.Fatalf("step %d: NeededCached said %d fit: %v", i, need, err)
			}
			if cached != hit*bs || cached >= len(tk) {
				t.Fatalf("step %d: cached %d for hit %d of %d tokens", i, cached, hit, len(tk))
			}
			hits += hit
			tab := m.Table(next)
			for j := range hit {
				if content[tab[j]] != h[j] {
					t.Fatalf("step %d: hit block %d holds other content", i, tab[j])
				}
			}
			seqs[next] = &live{tokens: tk, hashes: h, computed: cached}
			next++
		case r < 7 && len(seqs) > 0: // compute a chunk, maybe grow (decode)
			id, s := pick(seqs, rng)
			if s.computed == len(s.tokens) {
				s.tokens = append(s.tokens, int32(rng.IntN(101)))
				if _, err := m.Allocate(id, len(s.tokens)); err != nil {
					s.tokens = s.tokens[:len(s.tokens)-1]
					continue
				}
			}
			end := min(len(s.tokens), s.computed+1+rng.IntN(9))
			if err := m.CheckWritable(id, s.computed, end); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			tab := m.Table(id)
			s.hashes = HashBlocks(s.hashes, s.tokens[:end], bs)
			for p := s.computed; p < end; p++ {
				// A block's content is its chain hash once full; a
				// partial block's is "unfinished".
				if (p+1)%bs == 0 {
					content[tab[p/bs]] = s.hashes[p/bs]
				} else {
					content[tab[p/bs]] = BlockHash{}
				}
			}
			s.computed = end
			m.Commit(id, s.hashes[:s.computed/bs])
		case len(seqs) > 0: // finish or preempt
			id, _ := pick(seqs, rng)
			m.Free(id)
			delete(seqs, id)
		}
		if err := m.CheckInvariants(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if m.UsedBlocks()+m.FreeBlocks() != blocks {
			t.Fatalf("step %d: used %d + free %d", i, m.UsedBlocks(), m.FreeBlocks())
		}
	}
	for id := range seqs {
		m.Free(id)
	}
	check(t, m)
	if m.UsedBlocks() != 0 || hits == 0 {
		t.Fatalf("used %d after freeing all; %d hit blocks", m.UsedBlocks(), hits)
	}
	t.Logf("%d blocks mapped from the cache", hits)
}

// pick returns the live sequence with the smallest id at or after a random
// one, so the choice is deterministic for a seed despite map order.
func pick[T any](seqs map[SeqID]T, rng *rand.Rand) (SeqID, T) {
	ids := make([]SeqID, 0, len(seqs))
	for id := range seqs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	id := ids[rng.IntN(len(ids))]
	return id, seqs[id]
}
