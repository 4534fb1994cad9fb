// Package sched is the engine's scheduler: each step it decides which
// sequences run and how many of their tokens, in the shape of vLLM v1's
// scheduler. It never touches tensors; its output is a plain Plan.
//
// Model: every sequence has Tokens (prompt, then generated tokens) and
// Computed, the number of leading tokens whose KV is already in the cache.
// A step computes Tokens[Computed:Computed+n] for some n. A sequence whose
// step reaches the end of Tokens gets logits and samples one new token, so
// a decode is simply "one uncomputed token left". Prefill and decode are
// the same operation at different n, which is what makes chunked prefill
// and mixed batches fall out naturally.
//
// Policy per step, in order:
//  1. Every running sequence in decode gets its one token (oldest first).
//     If its block table must grow and no block is free, the newest running
//     sequence is preempted (see below) until the block fits; if the one
//     that needs the block is itself the newest, it is the one preempted.
//  2. Running sequences still in prefill get chunks, oldest first, from the
//     step's prefill budget (Config.PrefillChunk, capped by what is left of
//     Config.MaxBatchTokens after the decodes, and in a step that decodes
//     by what is left of Config.MixedBatchTokens: a long prompt is then
//     cut into pieces that run beside the decodes instead of stalling
//     them for a whole chunk).
//  3. Waiting sequences are admitted in strict FIFO order (no overtaking, so
//     a long prompt cannot starve) while fewer than Config.Parallel run,
//     prefill budget remains, no preemption happened this step, and the KV
//     cache can hold the whole sequence (less the blocks it shares from the
//     prefix cache, see below) plus a headroom of one free block
//     per running sequence (so those can cross their next block boundary
//     without preempting anybody). Blocks for the whole prompt are
//     allocated at admission, so a partially prefilled sequence never needs
//     more blocks until it decodes. When nothing is running the headroom is
//     waived, so the head of the queue is always admissible and the engine
//     cannot stall.
//
// Preemption is by recompute (vLLM's default): the victim's blocks are
// freed, its Computed drops to 0 and it goes back to the front of the
// waiting queue keeping its tokens, generated ones included. When it is
// admitted again it prefills prompt+generated and continues where it
// stopped; with the same sampler state the output is unchanged. Victims are
// always the most recently admitted, so the oldest sequence always makes
// progress and the policy cannot livelock as long as a single sequence of
// maximum length fits the cache (the engine enforces that at submit).
//
// Prefix caching (when the kvcache.Manager has it): at the start of every
// step, and when a sequence leaves (finish, cancel, preemption), the full
// blocks whose KV is computed are committed to the cache under their chain
// hashes. Admission maps the longest cached prefix of the sequence's tokens
// into its table and starts its Computed there, so only the rest is
// prefilled; the admission check counts only the blocks really taken (new
// ones, plus idle cached ones it revives). A preempted sequence usually
// finds its own blocks again. One refinement: when the next block the head
// of the queue would need is being computed in this very step by another
// sequence, admission waits for the next step, when that block is
// committed, instead of computing a duplicate (KV written in a step is not
// guaranteed visible to other sequences of the same step: a backend may
// write and read KV per sequence). Every planned chunk is checked to write
// only blocks its sequence holds alone and that are not cached.
package sched

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/kvcache"
)

// Config bounds a step.
type Config struct {
	Parallel       int // max running sequences
	PrefillChunk   int // max prefill tokens per step, all sequences together
	MaxBatchTokens int // max tokens per step, decodes and prefill together
	// MixedBatchTokens caps a step that decodes, decodes included (0: no
	// cap beyond MaxBatchTokens): the decodes' per-token latency bound.
	MixedBatchTokens int
}

// Seq is one sequence's scheduling state. The engine owns the Seq and
// updates Tokens and Computed after each step (see Plan).
type Seq struct {
	ID        kvcache.SeqID
	Tokens    []int32 // prompt followed by generated tokens
	PromptLen int
	// Computed is how many leading Tokens have their KV in the cache.
	Computed int

	// Preemptions counts how often this sequence was preempted.
	Preemptions int
	// CachedTokens is how many leading tokens its latest admission found in
	// the prefix cache: Computed started there.
	CachedTokens int

	// hashes is the chain hash of each full block of Tokens hashed so far
	// (prefix caching only); Tokens only grow, so it is extended, never
	// recomputed.
	hashes []kvcache.BlockHash

	// prefillEnd is len(Tokens) at admission: tokens before it are
	// prefill (prompt, or prompt+generated when recomputing after a
	// preemption), tokens after it are decodes.
	prefillEnd int
	running    bool
	// restore is the snapshot place its first chunk restores (-1: none).
	restore int
	// branch is where its prefill also stops to leave a snapshot
	// (kvcache.BranchPoint; 0: only at the prefill's last block boundary).
	branch int
}

// Remaining is the number of tokens not yet computed.
func (s *Seq) Remaining() int { return len(s.Tokens) - s.Computed }

// Running reports whether the sequence is admitted (holds KV blocks).
func (s *Seq) Running() bool { return s.running }

// Item is one sequence's share of a step: positions [Start, Start+Len) of
// Seq.Tokens.
type Item struct {
	Seq        *Seq
	Start, Len int
	Blocks     []int32 // the sequence's block table, covering Start+Len tokens
	// Slot is the sequence's KV slot (kvcache.Manager.Slot): stable from
	// admission until it finishes or is preempted, and held by no other
	// running sequence meanwhile.
	Slot int
	// Logits is set when the chunk reaches the end of Seq.Tokens: the
	// engine samples the next token from the logits of its last row.
	Logits bool
	// Prefill is set for prompt (or recompute) chunks, clear for decodes.
	Prefill bool
	// Restore, on the first chunk after an admission that found its
	// prefix in a cache with per-slot state snapshots: the engine copies
	// snapshot place Snap into Slot before the step.
	Restore bool
	Snap    int
	// Save: the chunk ends at the last block boundary of the sequence's
	// prefill, and SaveHash names that block; after the step the engine
	// saves the slot's state as the snapshot of SaveHash.
	Save     bool
	SaveHash kvcache.BlockHash
}

// Plan is the outcome of one scheduling decision.
type Plan struct {
	Items []Item
	// Admitted are the sequences that moved from waiting to running this
	// step (including re-admissions after preemption).
	Admitted []*Seq
	// Preempted are the sequences that lost their blocks this step and
	// were re-queued for recompute.
	Preempted []*Seq

	PrefillTokens, DecodeTokens int
	// PrefixQueryTokens is the tokens of the sequences admitted this step,
	// PrefixHitTokens how many of them were found in the prefix cache (both
	// 0 without prefix caching).
	PrefixQueryTokens, PrefixHitTokens int
}

// Empty reports whether the plan has nothing to compute.
func (p *Plan) Empty() bool { return len(p.Items) == 0 }

// Tokens is the total number of tokens the plan computes.
func (p *Plan) Tokens() int { return p.PrefillTokens + p.DecodeTokens }

// Scheduler holds the waiting queue and the running set.
type Scheduler struct {
	cfg     Config
	kv      *kvcache.Manager
	waiting []*Seq // FIFO; preempted sequences are pushed at the front
	running []*Seq // in admission order: the last one is the newest

	// pending holds the chain hashes of blocks the step being planned
	// completes (prefix caching; rebuilt per Schedule as items are
	// planned, pendingItems of them so far).
	pending      map[kvcache.BlockHash]struct{}
	pendingItems int

	// mixedPrefill caps the prefill of a step that also decodes (0: only
	// Config.MixedBatchTokens does); the engine sets it from its latency
	// target (SetMixedPrefill).
	mixedPrefill int
}

// SetMixedPrefill caps the prompt tokens of the steps that also decode
// running sequences, until set again (0: no cap beyond the Config's).
func (s *Scheduler) SetMixedPrefill(n int) { s.mixedPrefill = max(n, 0) }

// New creates a scheduler that allocates from kv.
func New(cfg Config, kv *kvcache.Manager) (*Scheduler, error) {
	if cfg.Parallel < 1 || cfg.PrefillChunk < 1 {
		return nil, fmt.Errorf("sched: Parallel (%d) and PrefillChunk (%d) must be positive", cfg.Parallel, cfg.PrefillChunk)
	}
	// Every running decode must fit one step, or some would never run.
	if cfg.MaxBatchTokens < cfg.Parallel {
		return nil, fmt.Errorf("sched: MaxBatchTokens (%d) must be at least Parallel (%d)", cfg.MaxBatchTokens, cfg.Parallel)
	}
	// A step of Parallel decodes must leave room for prefill, or arrivals
	// would wait for a decode to finish.
	if cfg.MixedBatchTokens != 0 && cfg.MixedBatchTokens <= cfg.Parallel {
		return nil, fmt.Errorf("sched: MixedBatchTokens (%d) must be more than Parallel (%d)", cfg.MixedBatchTokens, cfg.Parallel)
	}
	return &Scheduler{cfg: cfg, kv: kv}, nil
}

// KV is the block manager the scheduler allocates from.
func (s *Scheduler) KV() *kvcache.Manager { return s.kv }

// NumWaiting is the number of sequences waiting for admission.
func (s *Scheduler) NumWaiting() int { return len(s.waiting) }

// NumRunning is the number of admitted sequences.
func (s *Scheduler) NumRunning() int { return len(s.running) }

// Running lists the admitted sequences in admission order. The slice is the
// scheduler's own; do not modify it.
func (s *Scheduler) Running() []*Seq { return s.running }

// Waiting lists the waiting sequences in queue order. The slice is the
// scheduler's own; do not modify it.
func (s *Scheduler) Waiting() []*Seq { return s.waiting }

// Add queues a new sequence at the back of the waiting queue.
func (s *Scheduler) Add(q *Seq) {
	q.Computed = 0
	q.running = false
	q.restore = -1
	s.waiting = append(s.waiting, q)
}

// Remove drops q from the scheduler wherever it is (finished, cancelled or
// failed) and frees its blocks, after committing the computed full ones to
// the prefix cache (a failed step never advanced Computed, so its suspect
// writes are not among them). Removing an unknown sequence is a no-op.
func (s *Scheduler) Remove(q *Seq) {
	s.running = removeSeq(s.running, q)
	s.waiting = removeSeq(s.waiting, q)
	s.commit(q)
	s.kv.Free(q.ID)
	q.running = false
}

func removeSeq(list []*Seq, q *Seq) []*Seq {
	for i, x := range list {
		if x == q {
			// Keep order: admission order decides preemption victims and
			// queue order decides fairness.
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// Schedule plans the next step and reserves the KV blocks it needs. The
// caller runs the plan and then advances each item's Seq.Computed by
// Item.Len (and appends a sampled token where Item.Logits is set) before
// calling Schedule again.
func (s *Scheduler) Schedule() Plan {
	var p Plan
	budget := s.cfg.MaxBatchTokens
	if s.kv.PrefixCaching() {
		// What the last step computed becomes visible to admissions.
		for _, q := range s.running {
			s.commit(q)
		}
		clear(s.pending)
		s.pendingItems = 0
	}

	// 1. Decodes, oldest first. s.running may shrink from the end as
	// victims are preempted; a victim is always at or after i, so nothing
	// already planned is ever preempted.
	for i := 0; i < len(s.running); i++ {
		q := s.running[i]
		if q.Computed < q.prefillEnd {
			continue // still prefilling: phase 2
		}
		if !s.reserve(q, q.Computed+1, &p) {
			break // q itself was preempted, and it was the newest
		}
		s.checkWritable(q, q.Computed, 1)
		p.Items = append(p.Items, Item{Seq: q, Start: q.Computed, Len: 1, Blocks: s.kv.Table(q.ID), Slot: s.kv.Slot(q.ID), Logits: true})
		p.DecodeTokens++
		budget--
	}

	prefill := min(s.cfg.PrefillChunk, budget)
	if p.DecodeTokens > 0 && s.cfg.MixedBatchTokens > 0 {
		prefill = min(prefill, max(0, s.cfg.MixedBatchTokens-p.DecodeTokens))
	}
	if p.DecodeTokens > 0 && s.mixedPrefill > 0 {
		prefill = min(prefill, s.mixedPrefill)
	}

	// 2. Continue partial prefills, oldest first.
	for _, q := range s.running {
		if prefill == 0 {
			break
		}
		if q.Computed >= q.prefillEnd {
			continue
		}
		prefill -= s.planPrefill(q, prefill, &p)
	}

	// 3. Admit from the queue. Not in a step that had to preempt: the
	// cache is under pressure and admitting would only cause more churn.
	for len(p.Preempted) == 0 && prefill > 0 && len(s.waiting) > 0 && len(s.running) < s.cfg.Parallel {
		q := s.waiting[0]
		need := s.kv.Needed(q.ID, len(q.Tokens))
		if s.kv.PrefixCaching() {
			q.hashes = kvcache.HashBlocks(q.hashes, q.Tokens, s.kv.BlockSize())
			var hit int
			need, hit = s.kv.NeededCached(q.hashes, len(q.Tokens))
			if s.inFlight(q, hit, &p) {
				break // its next block is computed this step: hit it next step
			}
		}
		headroom := len(s.running) + 1
		if len(s.running) == 0 {
			headroom = 0
		}
		if need+headroom > s.kv.FreeBlocks() {
			break // strict FIFO: wait for blocks rather than overtake
		}
		cached, err := s.kv.AllocateCached(q.ID, q.hashes, len(q.Tokens))
		if err != nil {
			break // cannot happen after the check above; stay safe
		}
		s.waiting = s.waiting[1:]
		q.running = true
		q.Computed = cached
		q.CachedTokens = cached
		q.restore = -1
		q.branch = 0
		if s.kv.Snapshots() {
			if cached > 0 {
				// Lookup found the prefix only where a snapshot ends it.
				q.restore, _ = s.kv.SnapshotFor(q.hashes[cached/s.kv.BlockSize()-1])
			}
			q.branch = s.kv.BranchPoint(q.hashes, len(q.Tokens))
		}
		if s.kv.PrefixCaching() {
			p.PrefixQueryTokens += len(q.Tokens)
			p.PrefixHitTokens += cached
		}
		q.prefillEnd = len(q.Tokens)
		s.running = append(s.running, q)
		p.Admitted = append(p.Admitted, q)
		prefill -= s.planPrefill(q, prefill, &p)
	}
	return p
}

// Ahead plans q's next decode one token past the one now running, whose
// token is not known yet: pipelined greedy decode queues it before the
// running step's id reaches the host. It requires q.Computed to be that
// running step's Start (the engine has not yet advanced it), allocates the
// block for the new position and never preempts: ok is false when q is
// not decoding or blocks are short. The caller advances Computed and
// appends the token as for a planned item; if q ends first, its blocks go
// back with it and the step's result for it is dropped.
func (s *Scheduler) Ahead(q *Seq) (it Item, ok bool) {
	pos := q.Computed + 1
	if !q.running || q.Computed < q.prefillEnd || len(q.Tokens) != pos {
		return Item{}, false
	}
	if _, err := s.kv.Allocate(q.ID, pos+1); err != nil {
		return Item{}, false
	}
	s.checkWritable(q, pos, 1)
	return Item{Seq: q, Start: pos, Len: 1, Blocks: s.kv.Table(q.ID), Slot: s.kv.Slot(q.ID), Logits: true}, true
}

// planPrefill schedules up to budget tokens of q's prefill and returns how
// many it took. Blocks for the whole prefill were allocated at admission.
func (s *Scheduler) planPrefill(q *Seq, budget int, p *Plan) int {
	n := min(q.prefillEnd-q.Computed, budget)
	if n <= 0 {
		return 0
	}
	it := Item{Seq: q, Start: q.Computed, Blocks: s.kv.Table(q.ID), Slot: s.kv.Slot(q.ID), Prefill: true, Restore: q.restore >= 0, Snap: q.restore}
	q.restore = -1
	if s.kv.Snapshots() {
		// A chunk ends at the branch point and at the prefill's last
		// block boundary, so that the slot's state there can be saved for
		// later hits.
		bs := s.kv.BlockSize()
		for _, end := range []int{q.branch, (q.prefillEnd - 1) / bs * bs} {
			if end > q.Computed && q.Computed+n >= end {
				n = end - q.Computed
				q.hashes = kvcache.HashBlocks(q.hashes, q.Tokens[:end], bs)
				it.Save, it.SaveHash = true, q.hashes[end/bs-1]
				break
			}
		}
	}
	it.Len = n
	it.Logits = q.Computed+n == len(q.Tokens)
	s.checkWritable(q, q.Computed, n)
	p.Items = append(p.Items, it)
	p.PrefillTokens += n
	return n
}

// reserve grows q's table to cover tokens, preempting the newest running
// sequences while blocks are short. It returns false when q itself had to
// be preempted.
func (s *Scheduler) reserve(q *Seq, tokens int, p *Plan) bool {
	for {
		if _, err := s.kv.Allocate(q.ID, tokens); err == nil {
			return true
		}
		victim := s.running[len(s.running)-1]
		s.preempt(victim, p)
		if victim == q {
			return false
		}
	}
}

// preempt frees victim's blocks and puts it back at the front of the queue
// for recompute. Called only with the newest running sequence.
func (s *Scheduler) preempt(victim *Seq, p *Plan) {
	s.running = s.running[:len(s.running)-1]
	s.commit(victim)
	s.kv.Free(victim.ID)
	victim.running = false
	victim.Computed = 0
	victim.Preemptions++
	// Front of the queue: it was admitted before anything still waiting.
	// Victims are preempted newest first, so pushing each to the front
	// keeps their original admission order.
	s.waiting = append([]*Seq{victim}, s.waiting...)
	p.Preempted = append(p.Preempted, victim)
}

// commit offers q's computed full blocks to the prefix cache (a no-op
// without prefix caching, or when no new block is complete).
func (s *Scheduler) commit(q *Seq) {
	if !s.kv.PrefixCaching() {
		return
	}
	bs := s.kv.BlockSize()
	n := min(q.Computed, len(q.Tokens)) / bs
	if n == 0 {
		return
	}
	q.hashes = kvcache.HashBlocks(q.hashes, q.Tokens[:n*bs], bs)
	s.kv.Commit(q.ID, q.hashes[:n])
}

// checkWritable panics when a chunk would write KV into a block that is
// shared or cached: other sequences read it as it is, so going on would
// silently corrupt their output. Only full, computed blocks are ever
// cached or shared and writes go to later positions, so this never fires
// unless the bookkeeping is broken.
func (s *Scheduler) checkWritable(q *Seq, start, n int) {
	if err := s.kv.CheckWritable(q.ID, start, start+n); err != nil {
		panic(fmt.Sprintf("sched: %v", err))
	}
}

// inFlight reports whether the block q would need right after its hit
// cached blocks is one that an item already planned this step completes:
// admitted now, q would compute a copy of it; a step later it maps it.
func (s *Scheduler) inFlight(q *Seq, hit int, p *Plan) bool {
	bs := s.kv.BlockSize()
	if hit >= len(q.hashes) || hit >= (len(q.Tokens)-1)/bs {
		return false // nothing more that could come from the cache
	}
	if s.pending == nil {
		s.pending = map[kvcache.BlockHash]struct{}{}
	}
	for _, it := range p.Items[s.pendingItems:] {
		// Blocks [Start/bs, end/bs) become full with this item.
		end := (it.Start + it.Len) / bs
		if end <= it.Start/bs {
			continue
		}
		it.Seq.hashes = kvcache.HashBlocks(it.Seq.hashes, it.Seq.Tokens[:end*bs], bs)
		for _, h := range it.Seq.hashes[it.Start/bs : end] {
			s.pending[h] = struct{}{}
		}
	}
	s.pendingItems = len(p.Items)
	_, ok := s.pending[q.hashes[hit]]
	return ok
}
