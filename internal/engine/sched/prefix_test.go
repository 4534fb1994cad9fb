package sched

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/kvcache"
)

func newPrefixSched(t *testing.T, cfg Config, blocks, blockSize int) *Scheduler {
	t.Helper()
	kv, err := kvcache.NewWithOptions(blocks, blockSize, kvcache.Options{Slots: cfg.Parallel, PrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, kv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withPrefix is a sequence whose first len(prefix) tokens are prefix.
func withPrefix(prefix []int32, tail ...int32) *Seq {
	nextID++
	toks := append(slices.Clone(prefix), tail...)
	return &Seq{ID: nextID, Tokens: toks, PromptLen: len(toks)}
}

func step(t *testing.T, s *Scheduler, cfg Config) Plan {
	t.Helper()
	p := s.Schedule()
	checkPlan(t, s, p, cfg)
	if err := s.KV().CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	run(p)
	return p
}

func ramp(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(i*7%90 + 1)
	}
	return p
}

// A second sequence with the same 36-token prefix (9 blocks of 4) starts
// its prefill after it and counts the hit; only the tail is computed.
func TestAdmissionMapsCachedPrefix(t *testing.T) {
	cfg := Config{Parallel: 4, PrefillChunk: 512, MaxBatchTokens: 516}
	s := newPrefixSched(t, cfg, 64, 4)
	pre := ramp(36)
	a := withPrefix(pre, 1, 2, 3)
	s.Add(a)
	p := step(t, s, cfg)
	if p.PrefixQueryTokens != 39 || p.PrefixHitTokens != 0 || a.CachedTokens != 0 {
		t.Fatalf("cold: query %d hit %d", p.PrefixQueryTokens, p.PrefixHitTokens)
	}
	step(t, s, cfg) // a decodes; its 9 prompt blocks are committed first

	b := withPrefix(pre, 9, 9)
	s.Add(b)
	p = step(t, s, cfg)
	if len(p.Admitted) != 1 || b.CachedTokens != 36 || p.PrefixHitTokens != 36 || p.PrefixQueryTokens != 38 {
		t.Fatalf("b: cached %d, plan hit %d query %d", b.CachedTokens, p.PrefixHitTokens, p.PrefixQueryTokens)
	}
	it := p.Items[len(p.Items)-1]
	if it.Seq != b || it.Start != 36 || it.Len != 2 || !it.Logits {
		t.Fatalf("b's item %+v, want positions 36..37", it)
	}
	if !slices.Equal(s.KV().Table(a.ID)[:9], s.KV().Table(b.ID)[:9]) {
		t.Fatal("the prefix blocks are not shared")
	}
	// Freed, the blocks stay cached: a third sequence hits them too.
	s.Remove(a)
	s.Remove(b)
	c := withPrefix(pre[:20])
	s.Add(c)
	step(t, s, cfg)
	if c.CachedTokens != 16 { // 20 tokens: 4 blocks of 5 hit, the last token computed
		t.Fatalf("c cached %d, want 16", c.CachedTokens)
	}
}

// Cached blocks held by a running sequence cost nothing at admission: a
// sequence that would not fit counted whole is admitted.
func TestAdmissionCountsOnlyNewBlocks(t *testing.T) {
	cfg := Config{Parallel: 4, PrefillChunk: 512, MaxBatchTokens: 516}
	s := newPrefixSched(t, cfg, 16, 4)
	pre := ramp(40) // 10 blocks
	a := withPrefix(pre, 5)
	s.Add(a)
	step(t, s, cfg) // a: 11 blocks
	step(t, s, cfg)
	b := withPrefix(pre, 6)
	// 41 tokens = 11 blocks; 5 free. Without sharing b would wait.
	if s.KV().FreeBlocks() >= 11 {
		t.Fatalf("test setup: %d free", s.KV().FreeBlocks())
	}
	s.Add(b)
	p := step(t, s, cfg)
	if len(p.Admitted) != 1 || b.CachedTokens != 40 {
		t.Fatalf("b not admitted with its prefix shared: %+v, cached %d", p.Admitted, b.CachedTokens)
	}
}

// Two sequences with the same prompt arrive together: the second waits a
// step for the first one's blocks instead of computing them again.
func TestAdmissionWaitsForBlocksInFlight(t *testing.T) {
	cfg := Config{Parallel: 4, PrefillChunk: 100, MaxBatchTokens: 104}
	s := newPrefixSched(t, cfg, 64, 4)
	pre := ramp(40)
	a, b := withPrefix(pre, 1), withPrefix(pre, 2)
	s.Add(a)
	s.Add(b)
	p := step(t, s, cfg)
	if len(p.Admitted) != 1 || p.Admitted[0] != a {
		t.Fatalf("step 1 admitted %d, want only a", len(p.Admitted))
	}
	p = step(t, s, cfg)
	if len(p.Admitted) != 1 || b.CachedTokens != 40 || p.PrefillTokens != 1 {
		t.Fatalf("step 2: b cached %d, prefill %d", b.CachedTokens, p.PrefillTokens)
	}
	// A sequence sharing nothing with the running ones is not held back.
	c, d := seq(30), withPrefix(ramp(8), 3)
	d.Tokens[0] = 77
	s.Add(c)
	s.Add(d)
	p = step(t, s, cfg)
	if len(p.Admitted) != 2 {
		t.Fatalf("unrelated sequences admitted %d, want 2", len(p.Admitted))
	}
}

// A preempted sequence finds its own blocks in the cache when it comes
// back, so recompute is mostly free.
func TestPreemptedSequenceHitsItsOwnBlocks(t *testing.T) {
	cfg := Config{Parallel: 4, PrefillChunk: 512, MaxBatchTokens: 516}
	s := newPrefixSched(t, cfg, 12, 4)
	old := withPrefix(ramp(8))
	young := withPrefix(ramp(8))
	young.Tokens[0] = 50 // nothing shared with old
	s.Add(old)
	step(t, s, cfg)
	s.Add(young)
	var victim bool
	for range 40 {
		p := step(t, s, cfg)
		if len(p.Preempted) > 0 {
			victim = true
			break
		}
	}
	if !victim {
		t.Fatal("no preemption")
	}
	n := len(young.Tokens)
	s.Remove(old)
	p := step(t, s, cfg)
	if len(p.Admitted) != 1 || p.Admitted[0] != young {
		t.Fatalf("young not readmitted: %+v", p.Admitted)
	}
	// Its last block may have been evicted by old's growth; the rest of
	// its full blocks come back.
	if young.CachedTokens < (n-1)/4*4-4 || young.CachedTokens == 0 {
		t.Fatalf("readmitted with %d of %d tokens cached", young.CachedTokens, n)
	}
}

// TestPrefixRandomWorkload: many sequences from a few prompt families,
// small chunks, a cache small enough to preempt, random removals. Every
// plan keeps the usual invariants, the block manager's bookkeeping holds
// after every step, and writes only go to blocks held alone (Schedule
// panics otherwise).
func TestPrefixRandomWorkload(t *testing.T) {
	cfg := Config{Parallel: 5, PrefillChunk: 24, MaxBatchTokens: 29}
	s := newPrefixSched(t, cfg, 40, 4)
	rng := rand.New(rand.NewPCG(3, 4))
	families := [][]int32{ramp(60), ramp(45), withPrefix(ramp(30), 5, 5, 5).Tokens}
	families[1][0] = 88
	var live []*Seq
	var hits, preempted int
	for i := range 3000 {
		if rng.IntN(4) == 0 && len(live) < 12 {
			f := families[rng.IntN(len(families))]
			q := withPrefix(f[:1+rng.IntN(len(f))], int32(rng.IntN(90)))
			s.Add(q)
			live = append(live, q)
		}
		if rng.IntN(10) == 0 && len(live) > 0 {
			j := rng.IntN(len(live))
			s.Remove(live[j])
			live = append(live[:j], live[j+1:]...)
		}
		p := step(t, s, cfg)
		hits += p.PrefixHitTokens
		preempted += len(p.Preempted)
		for _, q := range live {
			if len(q.Tokens) > 100 {
				s.Remove(q)
			}
		}
		live = slices.DeleteFunc(live, func(q *Seq) bool { return len(q.Tokens) > 100 })
		if i%100 == 0 {
			for _, q := range s.Running() {
				if q.Computed < q.CachedTokens {
					t.Fatalf("sequence %d: computed %d < cached %d", q.ID, q.Computed, q.CachedTokens)
				}
			}
		}
	}
	if hits == 0 || preempted == 0 {
		t.Fatalf("workload too easy: %d hit tokens, %d preemptions", hits, preempted)
	}
	for _, q := range live {
		s.Remove(q)
	}
	if s.KV().UsedBlocks() != 0 {
		t.Fatalf("%d blocks still used", s.KV().UsedBlocks())
	}
	t.Logf("%d hit tokens, %d preemptions, %d blocks cached at the end", hits, preempted, s.KV().CachedBlocks())
}

// snapshotSched is a scheduler over 64 blocks of 4 tokens with prefix
// caching and a snapshot place per slot (as a store with slot state has).
func snapshotSched(t *testing.T) (*Scheduler, *kvcache.Manager, Config) {
	t.Helper()
	cfg := Config{Parallel: 4, PrefillChunk: 512, MaxBatchTokens: 516}
	kv, err := kvcache.NewWithOptions(64, 4, kvcache.Options{Slots: cfg.Parallel, PrefixCache: true, Snapshots: 4})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, kv)
	if err != nil {
		t.Fatal(err)
	}
	return s, kv, cfg
}

// With slot snapshots the prefill of a 39-token prompt (blocks of 4) is
// cut at 36, its last block boundary before the last token, and that chunk
// asks for a save under block 8's hash; the same prompt later hits 36
// tokens only once a snapshot is there, and its first chunk restores it.
func TestSnapshotCutAndRestore(t *testing.T) {
	s, kv, cfg := snapshotSched(t)
	pre := ramp(36)
	a := withPrefix(pre, 1, 2, 3)
	s.Add(a)
	p := step(t, s, cfg)
	hashes := kvcache.HashBlocks(nil, a.Tokens, 4)
	if it := p.Items[0]; it.Len != 36 || !it.Save || it.SaveHash != hashes[8] || it.Logits || it.Restore {
		t.Fatalf("first chunk %+v: want 36 tokens, a save under block 8's hash", it)
	}
	p = step(t, s, cfg)
	if it := p.Items[0]; it.Start != 36 || it.Len != 3 || it.Save || !it.Logits {
		t.Fatalf("second chunk %+v: want the 3-token tail, sampled", it)
	}
	s.Remove(a)

	b := withPrefix(pre, 1, 2, 3)
	s.Add(b)
	p = step(t, s, cfg)
	if p.PrefixHitTokens != 0 || p.Items[0].Restore {
		t.Fatalf("without a snapshot: hit %d, item %+v", p.PrefixHitTokens, p.Items[0])
	}
	s.Remove(b)

	place, _ := kv.TakeSnapshot(hashes[8])
	c := withPrefix(pre, 1, 2, 3)
	s.Add(c)
	p = step(t, s, cfg)
	if it := p.Items[0]; p.PrefixHitTokens != 36 || it.Start != 36 || !it.Restore || it.Snap != place || it.Save {
		t.Fatalf("with the snapshot: hit %d, item %+v (place %d)", p.PrefixHitTokens, it, place)
	}
}

// TestSnapshotAtBranchPoint: a prompt that shares a cached prefix with an
// earlier one but no snapshot there (the earlier prompt's is at its own
// end) stops its prefill where the shared blocks end and saves there; the
// next prompt sharing them hits that snapshot.
func TestSnapshotAtBranchPoint(t *testing.T) {
	s, kv, cfg := snapshotSched(t)
	system := ramp(32) // 8 blocks of 4 shared by every prompt
	prompt := func(tail ...int32) *Seq { return withPrefix(system, tail...) }
	a := prompt(91, 92, 93, 94, 95, 96, 97)
	s.Add(a)
	p := step(t, s, cfg)
	if it := p.Items[0]; it.Len != 36 || !it.Save {
		t.Fatalf("first prompt's chunk %+v: want 36 tokens and a save at its last boundary", it)
	}
	step(t, s, cfg)
	s.Remove(a)
	kv.TakeSnapshot(p.Items[0].SaveHash) // the engine's save after the step

	b := prompt(81, 82, 83, 84, 85, 86)
	s.Add(b)
	p = step(t, s, cfg)
	hb := kvcache.HashBlocks(nil, b.Tokens, 4)
	if it := p.Items[0]; p.PrefixHitTokens != 0 || it.Start != 0 || it.Len != 32 || !it.Save || it.SaveHash != hb[7] {
		t.Fatalf("second prompt: hit %d, chunk %+v: want 32 tokens to the branch point and a save under block 7's hash", p.PrefixHitTokens, it)
	}
	kv.TakeSnapshot(hb[7])
	p = step(t, s, cfg)
	if it := p.Items[0]; it.Start != 32 || it.Len != 4 || !it.Save || it.SaveHash != hb[8] {
		t.Fatalf("second prompt's next chunk %+v: want 4 tokens to its own last boundary, saved there", it)
	}
	step(t, s, cfg)
	s.Remove(b)

	c := prompt(71, 72, 73, 74, 75)
	s.Add(c)
	p = step(t, s, cfg)
	if it := p.Items[0]; p.PrefixHitTokens != 32 || it.Start != 32 || !it.Restore || it.Len != 4 {
		t.Fatalf("third prompt: hit %d, chunk %+v: want the 32 shared tokens from the branch point's snapshot", p.PrefixHitTokens, it)
	}
}
