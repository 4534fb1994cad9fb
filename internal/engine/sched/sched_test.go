package sched

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/kvcache"
)

func newSched(t *testing.T, cfg Config, blocks, blockSize int) *Scheduler {
	t.Helper()
	// As many slots as Parallel, like the engine: admitting more running
	// sequences than that would fail in Allocate.
	kv, err := kvcache.NewWithSlots(blocks, blockSize, cfg.Parallel)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, kv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var nextID kvcache.SeqID

func seq(n int) *Seq {
	nextID++
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(i % 50)
	}
	return &Seq{ID: nextID, Tokens: toks, PromptLen: n}
}

// run advances the plan the way the engine does: Computed moves over the
// chunk and a sequence with logits gets one new token.
func run(p Plan) {
	for _, it := range p.Items {
		it.Seq.Computed += it.Len
		if it.Logits {
			it.Seq.Tokens = append(it.Seq.Tokens, 1)
		}
	}
}

// checkPlan verifies invariants every plan must hold.
func checkPlan(t *testing.T, s *Scheduler, p Plan, cfg Config) {
	t.Helper()
	seen := map[*Seq]bool{}
	slots := map[int]bool{}
	pre, dec := 0, 0
	for _, it := range p.Items {
		if seen[it.Seq] {
			t.Fatalf("sequence %d planned twice", it.Seq.ID)
		}
		seen[it.Seq] = true
		if it.Slot < 0 || it.Slot >= cfg.Parallel || slots[it.Slot] || it.Slot != s.kv.Slot(it.Seq.ID) {
			t.Fatalf("sequence %d: slot %d out of range, shared or not its own (%d)", it.Seq.ID, it.Slot, s.kv.Slot(it.Seq.ID))
		}
		slots[it.Slot] = true
		if !it.Seq.Running() {
			t.Fatalf("sequence %d planned but not running", it.Seq.ID)
		}
		if it.Start != it.Seq.Computed || it.Len < 1 || it.Start+it.Len > len(it.Seq.Tokens) {
			t.Fatalf("bad item %+v (computed %d, tokens %d)", it, it.Seq.Computed, len(it.Seq.Tokens))
		}
		if len(it.Blocks)*s.kv.BlockSize() < it.Start+it.Len {
			t.Fatalf("blocks %v do not cover %d tokens", it.Blocks, it.Start+it.Len)
		}
		if it.Logits != (it.Start+it.Len == len(it.Seq.Tokens)) {
			t.Fatalf("logits flag wrong on %+v", it)
		}
		if it.Prefill {
			pre += it.Len
		} else {
			dec += it.Len
		}
	}
	if pre != p.PrefillTokens || dec != p.DecodeTokens {
		t.Fatalf("token counts %d/%d, items say %d/%d", p.PrefillTokens, p.DecodeTokens, pre, dec)
	}
	if p.Tokens() > cfg.MaxBatchTokens || p.PrefillTokens > cfg.PrefillChunk {
		t.Fatalf("plan over budget: %d prefill, %d total", p.PrefillTokens, p.Tokens())
	}
	if s.NumRunning() > cfg.Parallel {
		t.Fatalf("%d running > Parallel %d", s.NumRunning(), cfg.Parallel)
	}
}

func TestConfigValidation(t *testing.T) {
	kv, _ := kvcache.New(4, 4)
	for _, c := range []Config{{0, 1, 1, 0}, {1, 0, 1, 0}, {4, 8, 3, 0}, {4, 8, 12, 4}} {
		if _, err := New(c, kv); err == nil {
			t.Errorf("New(%+v) should fail", c)
		}
	}
}

func TestChunkedPrefillAlongsideDecode(t *testing.T) {
	cfg := Config{Parallel: 4, PrefillChunk: 512, MaxBatchTokens: 516}
	s := newSched(t, cfg, 1000, 16)
	a := seq(10)
	s.Add(a)
	p := s.Schedule()
	checkPlan(t, s, p, cfg)
	if len(p.Items) != 1 || p.Items[0].Len != 10 || !p.Items[0].Logits {
		t.Fatalf("first plan %+v", p.Items)
	}
	run(p)

	b := seq(2000)
	s.Add(b)
	var chunks []int
	for step := 0; b.Computed < 2000; step++ {
		p := s.Schedule()
		checkPlan(t, s, p, cfg)
		// The running decode gets exactly one token every step.
		if p.DecodeTokens != 1 || p.Items[0].Seq != a || p.Items[0].Len != 1 || p.Items[0].Prefill {
			t.Fatalf("step %d: decode not scheduled first with 1 token: %+v", step, p.Items)
		}
		if len(p.Items) != 2 || p.Items[1].Seq != b {
			t.Fatalf("step %d: items %+v", step, p.Items)
		}
		chunks = append(chunks, p.Items[1].Len)
		if p.Items[1].Logits != (b.Computed+p.Items[1].Len == 2000) {
			t.Fatalf("logits on a middle chunk")
		}
		run(p)
	}
	want := []int{512, 512, 512, 464}
	if len(chunks) != len(want) {
		t.Fatalf("chunks %v, want %v", chunks, want)
	}
	for i := range want {
		if chunks[i] != want[i] {
			t.Fatalf("chunks %v, want %v", chunks, want)
		}
	}
	// Both now decode, one token each.
	p = s.Schedule()
	checkPlan(t, s, p, cfg)
	if p.DecodeTokens != 2 || p.PrefillTokens != 0 {
		t.Fatalf("after prefill: %d decode %d prefill", p.DecodeTokens, p.PrefillTokens)
	}
}

func TestMaxBatchTokensCapsPrefill(t *testing.T) {
	cfg := Config{Parallel: 8, PrefillChunk: 512, MaxBatchTokens: 100}
	s := newSched(t, cfg, 1000, 16)
	for range 3 {
		s.Add(seq(60))
	}
	p := s.Schedule()
	checkPlan(t, s, p, cfg)
	// 60 for the first, 40 of the second, the third not admitted.
	if len(p.Items) != 2 || p.Items[0].Len != 60 || p.Items[1].Len != 40 || p.Items[1].Logits {
		t.Fatalf("items %+v", p.Items)
	}
	if s.NumRunning() != 2 || s.NumWaiting() != 1 {
		t.Fatalf("running %d waiting %d", s.NumRunning(), s.NumWaiting())
	}
	run(p)
	p = s.Schedule()
	checkPlan(t, s, p, cfg)
	// Decode of the first, the rest of the second, all of the third.
	if len(p.Items) != 3 || p.DecodeTokens != 1 || p.Items[1].Len != 20 || p.Items[2].Len != 60 {
		t.Fatalf("items %+v", p.Items)
	}
}

func TestParallelLimitAndFIFO(t *testing.T) {
	cfg := Config{Parallel: 2, PrefillChunk: 512, MaxBatchTokens: 514}
	s := newSched(t, cfg, 1000, 16)
	a, b, c := seq(5), seq(5), seq(5)
	s.Add(a)
	s.Add(b)
	s.Add(c)
	p := s.Schedule()
	checkPlan(t, s, p, cfg)
	if s.NumRunning() != 2 || s.Waiting()[0] != c {
		t.Fatalf("running %d, waiting %v", s.NumRunning(), s.Waiting())
	}
	run(p)
	s.Remove(a)
	p = s.Schedule()
	checkPlan(t, s, p, cfg)
	if len(p.Admitted) != 1 || p.Admitted[0] != c {
		t.Fatalf("admitted %v, want c", p.Admitted)
	}
}

func TestAdmissionWaitsForBlocks(t *testing.T) {
	cfg := Config{Parallel: 8, PrefillChunk: 512, MaxBatchTokens: 520}
	// 10 blocks of 4 tokens.
	s := newSched(t, cfg, 10, 4)
	big := seq(24) // 6 blocks
	s.Add(big)
	run(s.Schedule())
	// 4 free blocks; a 12-token prompt needs 3 plus headroom 2 (one per
	// running sequence after admission): must wait.
	next := seq(12)
	small := seq(1)
	s.Add(next)
	s.Add(small)
	p := s.Schedule()
	checkPlan(t, s, p, cfg)
	if len(p.Admitted) != 0 || s.NumWaiting() != 2 {
		t.Fatalf("admitted %v with too few blocks", p.Admitted)
	}
	// small would fit, but must not overtake next.
	run(p)
	s.Remove(big)
	if s.KV().UsedBlocks() != 0 {
		t.Fatalf("blocks still used: %d", s.KV().UsedBlocks())
	}
	p = s.Schedule()
	checkPlan(t, s, p, cfg)
	if len(p.Admitted) != 2 || p.Admitted[0] != next || p.Admitted[1] != small {
		t.Fatalf("admitted %v after free", p.Admitted)
	}
}

func TestHeadOfQueueAlwaysAdmitsWhenIdle(t *testing.T) {
	cfg := Config{Parallel: 2, PrefillChunk: 64, MaxBatchTokens: 66}
	s := newSched(t, cfg, 4, 4)
	q := seq(16) // exactly the whole cache
	s.Add(q)
	p := s.Schedule()
	checkPlan(t, s, p, cfg)
	if len(p.Admitted) != 1 {
		t.Fatal("a sequence that fits the empty cache must be admitted")
	}
}

func TestPreemptNewestAndRecompute(t *testing.T) {
	cfg := Config{Parallel: 4, PrefillChunk: 512, MaxBatchTokens: 516}
	// 6 blocks of 4 tokens = 24 slots.
	s := newSched(t, cfg, 6, 4)
	old, young := seq(4), seq(4)
	s.Add(old)
	run(s.Schedule()) // old: 1 block, 5 tokens now
	s.Add(young)
	p := s.Schedule() // old decodes (2nd block), young admitted (1 block, headroom ok)
	checkPlan(t, s, p, cfg)
	if len(p.Admitted) != 1 {
		t.Fatalf("young not admitted: %+v", p)
	}
	run(p)
	preempted := false
	for step := 0; step < 40 && !preempted; step++ {
		p := s.Schedule()
		checkPlan(t, s, p, cfg)
		if len(p.Preempted) > 0 {
			preempted = true
			if p.Preempted[0] != young || len(p.Preempted) != 1 {
				t.Fatalf("preempted %v, want the newest", p.Preempted)
			}
			if young.Computed != 0 || young.Running() || s.Waiting()[0] != young {
				t.Fatalf("victim state: computed %d running %v", young.Computed, young.Running())
			}
			if s.KV().Table(young.ID) != nil || s.KV().Slot(young.ID) != -1 {
				t.Fatal("victim kept its blocks or its slot")
			}
			if len(p.Items) != 1 || p.Items[0].Seq != old {
				t.Fatalf("old must keep decoding: %+v", p.Items)
			}
			if len(p.Admitted) != 0 {
				t.Fatal("admission in a step that preempted")
			}
		}
		if used := s.KV().UsedBlocks(); used > s.KV().NumBlocks() {
			t.Fatalf("used %d", used)
		}
		run(p)
	}
	if !preempted {
		t.Fatal("no preemption although the cache ran out")
	}
	// The old one finishes; the victim comes back and recomputes its
	// prompt and everything it had generated.
	youngLen := len(young.Tokens)
	s.Remove(old)
	p = s.Schedule()
	checkPlan(t, s, p, cfg)
	if len(p.Admitted) != 1 || p.Admitted[0] != young {
		t.Fatalf("victim not readmitted: %+v", p)
	}
	if it := p.Items[0]; it.Start != 0 || it.Len != youngLen || !it.Logits || !it.Prefill {
		t.Fatalf("recompute item %+v, want all %d tokens", it, youngLen)
	}
	if young.Preemptions != 1 {
		t.Fatalf("preemptions %d", young.Preemptions)
	}
}

func TestSelfPreemptionWhenNewestNeedsBlock(t *testing.T) {
	cfg := Config{Parallel: 4, PrefillChunk: 512, MaxBatchTokens: 516}
	s := newSched(t, cfg, 2, 4)
	a := seq(4)
	s.Add(a)
	run(s.Schedule())
	// a now has 5 tokens and needs a second block, which is free.
	p := s.Schedule()
	checkPlan(t, s, p, cfg)
	run(p)
	for a.Computed < 8 {
		p := s.Schedule()
		checkPlan(t, s, p, cfg)
		run(p)
	}
	// a fills both blocks; its next decode needs a third block that does
	// not exist, so the only (newest) sequence preempts itself.
	p = s.Schedule()
	if len(p.Preempted) != 1 || p.Preempted[0] != a || !p.Empty() {
		t.Fatalf("plan %+v", p)
	}
	if s.KV().UsedBlocks() != 0 {
		t.Fatal("blocks not freed")
	}
}

func TestRemoveFreesEverywhere(t *testing.T) {
	cfg := Config{Parallel: 1, PrefillChunk: 512, MaxBatchTokens: 512}
	s := newSched(t, cfg, 10, 4)
	a, b := seq(8), seq(8)
	s.Add(a)
	s.Add(b)
	run(s.Schedule())
	s.Remove(b) // waiting
	s.Remove(a) // running
	s.Remove(a) // twice: no-op
	if s.NumRunning() != 0 || s.NumWaiting() != 0 || s.KV().UsedBlocks() != 0 {
		t.Fatalf("running %d waiting %d used %d", s.NumRunning(), s.NumWaiting(), s.KV().UsedBlocks())
	}
	if p := s.Schedule(); !p.Empty() {
		t.Fatalf("plan after removing everything: %+v", p)
	}
}

// Ahead plans the token after the running decode: only for a decoding
// sequence whose running step has not been accounted yet, with the block
// for the new position, never preempting.
func TestAhead(t *testing.T) {
	cfg := Config{Parallel: 2, PrefillChunk: 64, MaxBatchTokens: 66}
	s := newSched(t, cfg, 3, 4)
	q := seq(6) // prefill of 6 tokens in blocks of 4
	if _, ok := s.Ahead(q); ok {
		t.Fatal("Ahead of a waiting sequence")
	}
	s.Add(q)
	p := s.Schedule()
	if _, ok := s.Ahead(q); ok {
		t.Fatal("Ahead while the prefill runs")
	}
	run(p) // Computed 6, 7 tokens
	p = s.Schedule()
	if len(p.Items) != 1 || p.Items[0].Start != 6 {
		t.Fatalf("decode plan %+v", p.Items)
	}
	// The decode at 6 runs; the step ahead is at 7, in the second block.
	it, ok := s.Ahead(q)
	if !ok || it.Start != 7 || it.Len != 1 || !it.Logits || len(it.Blocks) != 2 || it.Slot != p.Items[0].Slot {
		t.Fatalf("Ahead: %+v ok %v", it, ok)
	}
	q.Computed++
	q.Tokens = append(q.Tokens, 1) // the decode at 6 accepted
	// Now 8 tokens, 7 computed: the step at 7 runs, the one ahead at 8
	// needs a third block (the last free one).
	if it, ok = s.Ahead(q); !ok || it.Start != 8 || len(it.Blocks) != 3 {
		t.Fatalf("Ahead at a block boundary: %+v ok %v", it, ok)
	}
	q.Computed++
	q.Tokens = append(q.Tokens, 1)
	// Position 9 fits the third block; then 12 would need a fourth: none.
	if it, ok = s.Ahead(q); !ok || it.Start != 9 {
		t.Fatalf("Ahead: %+v ok %v", it, ok)
	}
	q.Computed, q.Tokens = 12, append(q.Tokens, 1, 1, 1, 1)
	if _, ok = s.Ahead(q); ok {
		t.Fatal("Ahead with no free block must not preempt or overcommit")
	}
	if len(s.running) != 1 {
		t.Fatalf("running %d", len(s.running))
	}
}

// TestMixedBatchTokens: a step that decodes prefills at most what is left
// of MixedBatchTokens after the decodes, so a long prompt runs in pieces
// beside them; a step without decodes still takes the whole chunk.
func TestMixedBatchTokens(t *testing.T) {
	cfg := Config{Parallel: 4, PrefillChunk: 1000, MaxBatchTokens: 1004, MixedBatchTokens: 100}
	s := newSched(t, cfg, 400, 16)
	a := seq(900)
	s.Add(a)
	p := s.Schedule()
	checkPlan(t, s, p, cfg)
	if p.PrefillTokens != 900 || p.DecodeTokens != 0 {
		t.Fatalf("alone: %d prefill, %d decode tokens; want the whole 900-token prompt", p.PrefillTokens, p.DecodeTokens)
	}
	run(p)
	b := seq(700)
	s.Add(b)
	for step := 0; b.Computed < b.PromptLen; step++ {
		p = s.Schedule()
		checkPlan(t, s, p, cfg)
		want := min(99, b.PromptLen-b.Computed)
		if p.DecodeTokens != 1 || p.PrefillTokens != want {
			t.Fatalf("step %d beside a decode: %d prefill, %d decode tokens; want %d and 1", step, p.PrefillTokens, p.DecodeTokens, want)
		}
		run(p)
	}
	if _, err := New(Config{Parallel: 4, PrefillChunk: 10, MaxBatchTokens: 14, MixedBatchTokens: 4}, s.kv); err == nil {
		t.Error("MixedBatchTokens no larger than Parallel was accepted")
	}

	// SetMixedPrefill (the engine's latency target) caps further; a step
	// without decodes is not capped.
	c := seq(300)
	s.Add(c)
	s.SetMixedPrefill(40)
	p = s.Schedule()
	checkPlan(t, s, p, cfg)
	if p.DecodeTokens != 2 || p.PrefillTokens != 40 {
		t.Fatalf("beside two decodes with SetMixedPrefill(40): %d prefill, %d decode tokens", p.PrefillTokens, p.DecodeTokens)
	}
	run(p)
	s.Remove(a)
	s.Remove(b)
	p = s.Schedule()
	if p.DecodeTokens != 0 || p.PrefillTokens != 260 {
		t.Fatalf("alone with SetMixedPrefill(40): %d prefill, %d decode tokens; want the 260 left", p.PrefillTokens, p.DecodeTokens)
	}
}
