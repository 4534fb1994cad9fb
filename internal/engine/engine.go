// Package engine runs continuous batching: many concurrent generation
// requests share one model, each step mixing decode tokens of running
// sequences with chunks of pending prompts (vLLM v1 style).
//
// Layout: the scheduler (package sched) decides what runs each step and
// owns the KV block bookkeeping (package kvcache); the runner (step.go)
// turns a plan into a backend.Batch, runs the model, samples and emits
// events; this file is the public API the HTTP server uses.
//
// One goroutine, locked to its OS thread, drives the model (a GPU backend
// needs a single thread to own its context). It sleeps on a channel when
// there is no work. Submit, Cancel and Stats are safe from any goroutine.
package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine/sched"
	"github.com/mlxcel/mlxcel/internal/kvcache"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// Model is what the engine needs of a loaded model (*model.Model
// satisfies it).
type Model interface {
	// Forward runs one step and returns the logits of b.LogitRows,
	// row-major [len(b.LogitRows), Vocab()].
	Forward(b *backend.Batch, kv backend.KVStore) ([]float32, error)
	Vocab() int
	KVLayers() []backend.KVLayer
	MaxContext() int
	Backend() backend.Backend
}

// reserver is implemented by models that can size their activation buffers
// up front; the engine tells them the largest step it will ever run so the
// steady state allocates nothing.
type reserver interface{ Reserve(tokens int) }

// Sampler picks the next token of one sequence. *sample.Sampler satisfies
// it; each request gets its own. The engine draws with SampleWith and
// u = sample.Uniform(seed, output position), the rule backends that sample
// rows themselves follow too (rowsample.go), so a seeded request gives the
// same tokens on either path and whatever else is in the batch.
type Sampler interface {
	SampleWith(logits []float32, prompt, generated []int32, u float64) sample.Result
}

// Defaults for zero Config fields.
const (
	DefaultParallel     = 8
	DefaultMaxQueue     = 256
	DefaultPrefillChunk = 512
	// DefaultPrefillChunkGPU is the chunk on a GPU backend. A GPU's
	// prefill pays per chunk for re-reading (and dequantizing) every
	// weight and for its GEMMs' ramp: on the H200 an 8192-token prompt of
	// Llama-3.1-8B 4-bit prefills at 25.8k tok/s in 2048-token chunks and
	// 29.2k in one chunk (benchmarks/cuda_h200_2026-11-29_v8.md). The cost
	// is a longer pause of running decodes while a chunk runs (~0.28 s for
	// that model), the trade vLLM's default of 8192 batched tokens makes
	// for online serving too. --prefill-chunk overrides.
	DefaultPrefillChunkGPU = 8192
	// DefaultMixedBatchTokensGPU caps the steps that also decode on an
	// accelerator (vLLM's max_num_batched_tokens of its chunked-prefill
	// default): a running decode then waits at most for a 2048-token
	// piece of a long prompt (~65 ms for Llama-3.1-8B 4-bit on the H200)
	// instead of a whole 8192-token chunk (~0.26 s: ITL p99 249 ms with
	// 4096-token prompts at concurrency 16), while a step that only
	// prefills still takes the whole chunk. --max-batched-tokens overrides.
	DefaultMixedBatchTokensGPU = 2048
)

// DefaultPrefillChunkFor is the prefill chunk for a backend: the long one
// on an accelerator.
func DefaultPrefillChunkFor(be backend.Backend) int {
	if be != nil && backend.IsAccelerator(be) {
		return DefaultPrefillChunkGPU
	}
	return DefaultPrefillChunk
}

// Config sizes the engine. Zero fields take defaults.
type Config struct {
	// Parallel is the maximum number of sequences running at once
	// (default DefaultParallel).
	Parallel int
	// MaxQueue is how many requests may wait beyond the Parallel running
	// ones before Submit fails with ErrQueueFull (default DefaultMaxQueue;
	// negative means none may wait).
	MaxQueue int
	// PrefillChunk is the most prompt tokens processed per step, all
	// sequences together (default DefaultPrefillChunkFor the model's backend). Long prompts are
	// split into chunks so running decodes keep their per-token latency.
	PrefillChunk int
	// MaxBatchTokens caps the tokens of one step, decodes included
	// (default PrefillChunk + Parallel; must be at least Parallel).
	MaxBatchTokens int
	// MixedBatchTokens caps a step that also decodes, decodes included
	// (default DefaultMixedBatchTokensGPU on an accelerator, raised to
	// Parallel+256 when that is larger; on the host no cap beyond
	// MaxBatchTokens; negative: none).
	MixedBatchTokens int
	// BlockSize is the KV block size in tokens (default 16).
	BlockSize int
	// KVDtype is how the KV store keeps K and V (--kv-cache-dtype;
	// default auto, the backend's own: docs/kv-cache.md).
	KVDtype backend.KVDtype
	// NumBlocks is the number of KV blocks (default: enough for Parallel
	// sequences of MaxContext tokens; a server should size it from the
	// memory it can spare).
	NumBlocks int
	// MaxContext caps prompt + generated tokens per sequence (default and
	// upper bound: the model's MaxContext; also capped by what the KV
	// cache can hold).
	MaxContext int
	// DisablePrefixCache turns automatic prefix caching off: by default
	// the KV of full blocks is kept after use and a request whose prompt
	// starts with the same tokens as an earlier one maps those blocks
	// instead of computing them again (kvcache prefix.go). It is off anyway
	// when sliding-window layers are stored in per-slot rings or the model
	// has recurrent layers (see New).
	DisablePrefixCache bool

	// ITLTarget, when positive, bounds the steps that prefill beside
	// running decodes by their expected time instead of MixedBatchTokens
	// alone: the engine learns what decode steps and prompt tokens cost
	// and gives such a step the prompt tokens that fit (itl.go), at least
	// MinMixedPrefill. 0: the token caps only.
	ITLTarget time.Duration

	// RunAhead selects pipelined decode (pipeline.go): by default on when
	// the backend queues steps asynchronously.
	RunAhead RunAheadMode

	// OnFinish is called once per finished request (any reason), from the
	// engine goroutine: keep it fast and non-blocking.
	OnFinish func(t Timing, finishReason string)
	// OnStep is called once per step from the engine goroutine: keep it
	// fast and non-blocking.
	OnStep func(StepStats)
}

// Request is one generation request.
type Request struct {
	Prompt []int32
	// Params are used as given: the server validates them
	// (sample.Params.Validate) before submitting.
	Params sample.Params
	// MaxTokens caps generated tokens; 0 means up to the context length.
	MaxTokens int
	// StopIDs end generation when sampled (finish reason "stop"); the
	// caller includes the model's EOS ids here along with any user stop
	// token ids.
	StopIDs []int32
	// NeedLogprob asks for the chosen token's logprob even when
	// Params.Logprobs is 0 (OpenAI's logprobs: true, top_logprobs: 0); it
	// keeps greedy requests off the argmax-only path.
	NeedLogprob bool
	// IgnoreEOS disables StopIDs: generation runs to MaxTokens or the
	// context length (benchmarks).
	IgnoreEOS bool
	// Constraint, when set, restricts each sampled token (grammar-
	// constrained decoding, constraint.go); it keeps the request off the
	// argmax-only paths. Its mask goes with the row to a backend that
	// samples (rowsample.go) or is applied to the logits on the host.
	Constraint Constraint
}

// Errors returned by Submit.
var (
	ErrQueueFull      = errors.New("engine: queue full")
	ErrPromptTooLong  = errors.New("engine: prompt plus max tokens exceed the context length")
	ErrStopped        = errors.New("engine: stopped")
	ErrInvalidRequest = errors.New("engine: invalid request")
)

// Engine is a continuous-batching generation loop over one model.
type Engine struct {
	m          Model
	cfg        Config
	cost       stepCost // the steps' costs so far, for ITLTarget (loop goroutine only)
	vocab      int
	maxContext int
	kvStore    backend.KVStore
	sched      *sched.Scheduler
	newSampler func(p sample.Params, vocab int) Sampler
	workers    int  // goroutines for parallel sampling
	runAhead   bool // pipelined greedy decode (pipeline.go)
	// sampleAhead: sampled steps run ahead too (sampledAhead rows).
	sampleAhead bool

	mu      sync.Mutex
	inbox   []*request // submitted, not yet seen by the loop
	live    int        // submitted and not finished: bounds the queue
	nextID  kvcache.SeqID
	started bool
	stopped bool

	wake chan struct{} // cap 1: "there is new work"
	quit chan struct{}
	done chan struct{}
	stop sync.Once

	// Owned by the loop goroutine.
	reqs  map[kvcache.SeqID]*request
	batch backend.Batch // reused every step

	statsMu   sync.Mutex
	stats     Stats
	submitted atomic.Uint64
	rejected  atomic.Uint64
}

// New sizes an engine for m and creates its KV store on m's backend.
func New(m Model, cfg Config) (*Engine, error) {
	cfg = sizingDefaults(cfg, m.Backend())
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = DefaultMaxQueue
	} else if cfg.MaxQueue < 0 {
		cfg.MaxQueue = 0
	}
	switch be := m.Backend(); {
	case cfg.MixedBatchTokens < 0:
		cfg.MixedBatchTokens = 0
	case cfg.MixedBatchTokens == 0 && be != nil && backend.IsAccelerator(be):
		cfg.MixedBatchTokens = max(DefaultMixedBatchTokensGPU, cfg.Parallel+256)
	}
	maxCtx := m.MaxContext()
	if cfg.MaxContext > 0 && cfg.MaxContext < maxCtx {
		maxCtx = cfg.MaxContext
	}
	if maxCtx < 2 {
		return nil, fmt.Errorf("engine: context length %d too small", maxCtx)
	}
	if cfg.NumBlocks <= 0 {
		cfg.NumBlocks = (maxCtx + cfg.BlockSize - 1) / cfg.BlockSize * cfg.Parallel
	}
	// A sequence longer than the whole cache could never finish: recompute
	// preemption would loop on it. Capping the context here keeps the
	// scheduler's progress guarantee.
	maxCtx = min(maxCtx, cfg.NumBlocks*cfg.BlockSize)
	cfg.MaxContext = maxCtx

	if m.Backend() == nil {
		return nil, errors.New("engine: model has no backend")
	}
	spec := kvSpec(cfg, m.KVLayers(), m.Backend())
	// One slot per running sequence: it picks the sequence's ring of
	// sliding-window KV (see kvSpec).
	// Prefix caching shares blocks, but a ring belongs to a slot: a
	// sequence that mapped cached blocks would start computing with a ring
	// missing the window of keys before its first computed position.
	// Recurrent layers (Qwen3.5's linear attention) likewise hold one
	// state per slot summarising every position so far. Where the backend
	// keeps snapshots of a slot's state (backend.SlotSnapshotter), a
	// prefix hit restores the snapshot taken at the prefix's end, so such
	// models cache too; elsewhere caching is off for them, and rings win
	// (they are what makes long contexts affordable). Windowed layers kept
	// paged have every position in the blocks and cache like any other
	// layer (docs/kv-cache.md).
	spec = WithSnapshots(spec, cfg, m.Backend())
	prefix := !cfg.DisablePrefixCache && (!backend.HasSlotState(spec) || spec.Snapshots > 0)
	kv, err := kvcache.NewWithOptions(cfg.NumBlocks, cfg.BlockSize, kvcache.Options{Slots: cfg.Parallel, PrefixCache: prefix, Snapshots: spec.Snapshots})
	if err != nil {
		return nil, err
	}
	s, err := sched.New(sched.Config{
		Parallel:         cfg.Parallel,
		PrefillChunk:     cfg.PrefillChunk,
		MaxBatchTokens:   cfg.MaxBatchTokens,
		MixedBatchTokens: cfg.MixedBatchTokens,
	}, kv)
	if err != nil {
		return nil, err
	}
	store, err := m.Backend().NewKVStore(spec)
	if err != nil {
		return nil, fmt.Errorf("engine: KV store: %w", err)
	}
	if r, ok := m.(reserver); ok {
		r.Reserve(cfg.MaxBatchTokens)
	}
	e := &Engine{
		m:          m,
		cfg:        cfg,
		vocab:      m.Vocab(),
		maxContext: maxCtx,
		kvStore:    store,
		sched:      s,
		newSampler: func(p sample.Params, vocab int) Sampler { return sample.New(p, vocab) },
		workers:    max(1, runtime.GOMAXPROCS(0)),
		wake:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
		reqs:       map[kvcache.SeqID]*request{},
	}
	e.runAhead, e.sampleAhead = runsAhead(m, cfg.RunAhead)
	e.stats.KVBlocksTotal = cfg.NumBlocks
	return e, nil
}

// sizingDefaults fills in the Config fields the KV store's size depends
// on, as New does.
func sizingDefaults(cfg Config, be backend.Backend) Config {
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.PrefillChunk <= 0 {
		cfg.PrefillChunk = DefaultPrefillChunkFor(be)
	}
	if cfg.MaxBatchTokens <= 0 {
		cfg.MaxBatchTokens = cfg.PrefillChunk + cfg.Parallel
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = kvcache.DefaultBlockSize
	}
	return cfg
}

// kvSpec sizes the backend KV store. Windowed layers get a ring per slot
// of max window + MaxBatchTokens positions (ringTokens). Rings are asked
// for only when they are smaller than the paged store they replace
// (Parallel rings against NumBlocks*BlockSize positions); a short context
// or a huge window keeps windowed layers paged, which is always correct.
func kvSpec(cfg Config, layers []backend.KVLayer, be backend.Backend) backend.KVSpec {
	spec := backend.KVSpec{NumBlocks: cfg.NumBlocks, BlockSize: cfg.BlockSize, Layers: layers, Slots: cfg.Parallel, Dtype: cfg.KVDtype}
	if ring := ringTokens(cfg, layers, be); ring > 0 && cfg.Parallel*ring < cfg.NumBlocks*cfg.BlockSize {
		spec.RingTokens = ring
	}
	return spec
}

// ringTokens is the ring a windowed layer would get, 0 without windowed
// layers or on a backend that keeps none (FeatureRings): one sequence's
// chunk is at most MaxBatchTokens, so the chunk's keys and the window-1
// keys before it fit at once (the backend's Window-1+Len <= RingTokens
// contract, with one spare).
func ringTokens(cfg Config, layers []backend.KVLayer, be backend.Backend) int {
	if !backend.Supports(be, backend.FeatureRings) {
		return 0
	}
	window := 0
	for _, l := range layers {
		window = max(window, l.Window)
	}
	if window == 0 {
		return 0
	}
	return window + cfg.MaxBatchTokens
}

// KVSpec is the store New allocates on be for layers under cfg (its
// NumBlocks given, the other sizing fields defaulted as New does): with
// backend.KVStoreBytes, what a cache of that size costs.
func KVSpec(be backend.Backend, cfg Config, layers []backend.KVLayer) backend.KVSpec {
	cfg = sizingDefaults(cfg, be)
	return WithSnapshots(kvSpec(cfg, layers, be), cfg, be)
}

// WithSnapshots is spec with the snapshot places prefix caching needs on
// be: one per slot when the store keeps per-slot state and be can copy
// it, so every running prompt can leave one.
func WithSnapshots(spec backend.KVSpec, cfg Config, be backend.Backend) backend.KVSpec {
	spec.Snapshots = 0
	if _, ok := be.(backend.SlotSnapshotter); ok && !cfg.DisablePrefixCache && backend.HasSlotState(spec) {
		spec.Snapshots = spec.Slots
	}
	return spec
}

// KVBlocksWithin is the most blocks whose store (as New sizes it on be
// for layers under cfg, NumBlocks aside) fits in budget bytes, 0 if not
// one. The store's size is affine in the blocks on each side of the point
// where windowed layers move from paged blocks into the smaller rings,
// so both sides are solved and the larger answer that is on its side wins.
func KVBlocksWithin(be backend.Backend, cfg Config, layers []backend.KVLayer, budget int64) int {
	cfg = sizingDefaults(cfg, be)
	paged := WithSnapshots(backend.KVSpec{BlockSize: cfg.BlockSize, Layers: layers, Slots: cfg.Parallel, Dtype: cfg.KVDtype}, cfg, be)
	n := backend.KVCostOf(be, paged).Blocks(budget, math.MaxInt32)
	if ring := ringTokens(cfg, layers, be); ring > 0 {
		last := cfg.Parallel * ring / cfg.BlockSize // the most blocks that keep windowed layers paged
		n = min(n, last)
		rings := paged
		rings.RingTokens = ring
		rings = WithSnapshots(rings, cfg, be)
		if r := backend.KVCostOf(be, rings).Blocks(budget, math.MaxInt32); r > last {
			n = r
		}
	}
	return n
}

// Config is the effective configuration, defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// MaxContext is the longest sequence (prompt + generated) the engine runs.
func (e *Engine) MaxContext() int { return e.maxContext }

// PrefixCacheOff says why prefix caching is off ("" when it is on).
func (e *Engine) PrefixCacheOff() string {
	switch {
	case e.PrefixCaching():
		return ""
	case e.cfg.DisablePrefixCache:
		return "disabled"
	}
	return fmt.Sprintf("the %s backend keeps no snapshots of the per-slot state (recurrent layers or sliding-window rings) a hit needs", e.m.Backend().Name())
}

// PrefixCaching reports whether the engine reuses cached prompt prefixes
// (Config.DisablePrefixCache off; with sliding-window rings or recurrent
// layers only on a backend that snapshots slot state).
func (e *Engine) PrefixCaching() bool { return e.sched.KV().PrefixCaching() }

// KVStore is the backend KV memory the engine allocated.
func (e *Engine) KVStore() backend.KVStore { return e.kvStore }

// Start launches the engine goroutine. Requests submitted before Start wait
// for it. Calling Start again, or after Stop, does nothing.
func (e *Engine) Start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.stopped {
		return
	}
	e.started = true
	go e.loop()
}

// Stop ends the engine: Submit fails with ErrStopped from then on, every
// unfinished request ends with FinishError and ErrStopped, and Stop
// returns once the engine goroutine has exited (after its current step).
// It is safe to call more than once.
func (e *Engine) Stop() {
	e.stop.Do(func() {
		e.mu.Lock()
		e.stopped = true
		started := e.started
		e.mu.Unlock()
		close(e.quit)
		if started {
			<-e.done
			return
		}
		// Never started: the requests are all still in the inbox.
		e.shutdown()
	})
}

// Submit queues r and returns its event stream. Cancelling ctx (or calling
// Stream.Cancel) ends the request and frees its KV blocks within a step.
func (e *Engine) Submit(ctx context.Context, r Request) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(r.Prompt) == 0 {
		return nil, fmt.Errorf("%w: empty prompt", ErrInvalidRequest)
	}
	for _, id := range r.Prompt {
		// Checked here because one bad id would fail the model's whole
		// batch, taking other requests down with it.
		if id < 0 || int(id) >= e.vocab {
			return nil, fmt.Errorf("%w: token id %d outside the vocabulary (%d)", ErrInvalidRequest, id, e.vocab)
		}
	}
	if r.MaxTokens < 0 {
		return nil, fmt.Errorf("%w: max tokens %d", ErrInvalidRequest, r.MaxTokens)
	}
	if len(r.Prompt) >= e.maxContext || len(r.Prompt)+r.MaxTokens > e.maxContext {
		return nil, fmt.Errorf("%w: %d prompt + %d max tokens > %d", ErrPromptTooLong, len(r.Prompt), r.MaxTokens, e.maxContext)
	}
	if r.MaxTokens == 0 {
		r.MaxTokens = e.maxContext - len(r.Prompt)
	}

	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return nil, ErrStopped
	}
	if e.live >= e.cfg.Parallel+e.cfg.MaxQueue {
		e.mu.Unlock()
		e.rejected.Add(1)
		return nil, ErrQueueFull
	}
	e.live++
	e.nextID++
	q := newRequest(ctx, e.nextID, r, e.newSampler(r.Params, e.vocab))
	e.inbox = append(e.inbox, q)
	e.mu.Unlock()

	e.submitted.Add(1)
	e.signal()
	return q.stream, nil
}

// signal wakes the loop if it sleeps; never blocks.
func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Stats is a snapshot of the engine's state and counters.
type Stats struct {
	Running, Waiting int
	KVUsage          float64 // fraction of KV blocks in use, 0..1
	KVBlocksUsed     int
	KVBlocksTotal    int
	// KVBlocksCached is the idle blocks kept by the prefix cache: no
	// request holds them, they are reused on a prefix hit or evicted when
	// blocks run short (they count as free in KVUsage).
	KVBlocksCached int
	// BatchSize and BatchTokens describe the last step (0 once idle).
	BatchSize, BatchTokens int

	Steps, PrefillTokens, DecodeTokens uint64
	// RunAheadSteps counts the decode steps queued before the previous
	// step's ids came back (pipelined decode), RunAheadSampled those of
	// them that sampled on the device; DecodeTokens counts only the
	// tokens emitted.
	RunAheadSteps, RunAheadSampled uint64
	Preemptions                    uint64
	// PrefixCacheQueries is the tokens of admitted sequences looked up in
	// the prefix cache, PrefixCacheHits how many were found there and not
	// computed (as vLLM's prefix_cache_queries/hits; re-admissions after a
	// preemption count again). Both stay 0 without prefix caching.
	PrefixCacheQueries, PrefixCacheHits uint64
	// SnapshotsSaved counts the slot snapshots saved for prefix caching
	// (snapshot.go), SnapshotFailures the saves the backend refused: their
	// prefixes are not cached, and nothing else shows it.
	SnapshotsSaved, SnapshotFailures uint64
	Submitted, Rejected              uint64 // Rejected: ErrQueueFull
	Finished, Cancelled, Errors      uint64 // Finished counts every end, whatever the reason
}

// StepStats describe one step, for OnStep.
type StepStats struct {
	Seqs, Tokens                int // sequences and tokens in the batch
	PrefillTokens, DecodeTokens int
	Admitted, Preempted         int
	Running, Waiting            int // after the step
	KVUsage                     float64
	Duration                    time.Duration // schedule + forward + sampling; a step queued ahead: from the previous step's end
}

// Stats returns a snapshot. The loop publishes its part once per step.
func (e *Engine) Stats() Stats {
	e.statsMu.Lock()
	s := e.stats
	e.statsMu.Unlock()
	e.mu.Lock()
	s.Waiting += len(e.inbox)
	e.mu.Unlock()
	s.Submitted = e.submitted.Load()
	s.Rejected = e.rejected.Load()
	return s
}
