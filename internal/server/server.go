// Package server is mlxcel's OpenAI-compatible HTTP server: chat and text
// completions (streaming or not), models, health, llama-server style
// tokenize/detokenize and Prometheus metrics, over one model driven by the
// continuous-batching engine.
//
// The HTTP listener comes up before the model is loaded (health answers
// 503 until Ready), so orchestrators see the process alive while a large
// model loads. Each request becomes one engine stream through
// generate.Run; a client that goes away cancels its stream, which frees
// its batch slot and KV blocks within a step.
package server

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/tokenizer"
)

// Options configure a Server. Zero fields take defaults.
type Options struct {
	// ServedModelName is the model id clients send and /v1/models lists
	// (default: the model directory's base name, or stories260k).
	ServedModelName string
	// APIKey, when set, is required as "Authorization: Bearer <key>" on
	// every endpoint but /health and /metrics.
	APIKey string

	// Engine sizing, see engine.Config. CtxSize caps prompt + generated
	// tokens per sequence (0: the model's). KVBlocks or KVMemMiB size the
	// KV cache (at most one; neither: enough for Parallel full contexts).
	Parallel     int
	MaxQueue     int
	PrefillChunk int
	// MaxBatchedTokens caps a step that also decodes (engine.Config.MixedBatchTokens).
	MaxBatchedTokens int
	// ITLTarget bounds such a step by its expected time (engine.Config.ITLTarget).
	ITLTarget time.Duration
	// GPUMemoryUtilization is the share of a device's memory planned for
	// (0: DefaultGPUMemoryUtilization): with no KV size given, the KV
	// cache (and, with Parallel 0, the slots) are sized from it.
	GPUMemoryUtilization float64
	CtxSize              int
	KVBlocks             int
	KVMemMiB             int
	BlockSize            int
	// KVCacheDtype is how the KV cache keeps K and V
	// (engine.Config.KVDtype).
	KVCacheDtype backend.KVDtype
	// NoPrefixCache turns automatic prefix caching off
	// (engine.Config.DisablePrefixCache).
	NoPrefixCache bool
	// NoRunAhead turns pipelined greedy decode off (engine.RunAheadOff;
	// by default on when the backend queues steps asynchronously).
	NoRunAhead bool

	// MaxBodyBytes bounds request bodies (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// PlainChat forces the plain chat fallback on for a model without a
	// chat template (see plainchat.go); it is on anyway for models that
	// carry the embedded stories260k tokenizer.
	PlainChat bool
	// Agent picks the tool-call and reasoning parsers and a chat template
	// override (agent.go).
	Agent AgentOptions
	// Logger receives one line per request and the server's events
	// (default: discard).
	Logger *slog.Logger

	// Limits against hostile clients (limits.go, conns.go, origin.go).
	// StallTimeout: a body read or response write without progress for
	// this long closes the connection (default DefaultStallTimeout).
	// MaxConns caps open connections (default DefaultMaxConns).
	// BodyBudget bounds the bytes of request bodies in flight (default
	// DefaultBodyBudget).
	StallTimeout time.Duration
	MaxConns     int
	BodyBudget   int64
	// AllowedOrigins are the web origins (besides the server's own) whose
	// browser requests are served; "*" allows any. AllowedHosts, when
	// set, are the only Host header names served.
	AllowedOrigins []string
	AllowedHosts   []string
}

// Server serves one model. Create it with New, serve Handler, then call
// Ready once the model is loaded.
type Server struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	handler http.Handler

	mu     sync.Mutex             // serialises Ready and Close
	state  atomic.Pointer[served] // nil while loading
	closed bool

	drainState
	budget byteBudget
	conns  *connLimiter
}

// served is the loaded model and its engine: everything a request needs.
type served struct {
	name     string
	created  int64
	loaded   *app.Loaded
	eng      *engine.Engine
	tok      *tokenizer.Tokenizer
	template *chat.Template
	// templateErr is why the model's template failed to load: chat
	// requests get a 400 naming it, completions still work.
	templateErr error
	plainChat   bool
	promptBytes int64 // longer texts cannot fit the context (prompts.go)
	stopIDs     []int32
	vocab       int
	texts       *tokenTexts
	agent       agentModel
}

// New makes a server in the loading state: /health answers 503 and the
// API endpoints refuse with 503 until Ready.
func New(o Options) *Server {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.BodyBudget <= 0 {
		o.BodyBudget = max(DefaultBodyBudget, o.MaxBodyBytes)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{opts: o, log: log, conns: newConnLimiter(o.MaxConns)}
	s.budget.limit = o.BodyBudget
	s.decode = newDecodeGate()
	s.metrics = newMetrics(s.stats)
	s.handler = s.routes()
	return s
}

// Handler is the HTTP handler of every endpoint.
func (s *Server) Handler() http.Handler { return s.handler }

// Ready builds the engine over l, starts it and switches the server to
// serving. It fails if the KV cache options do not fit the model.
func (s *Server) Ready(l *app.Loaded) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("server: closed")
	}
	if s.state.Load() != nil {
		return errors.New("server: a model is already loaded")
	}
	tmpl, agent, err := s.opts.Agent.setupAgent(l)
	if err != nil {
		return err
	}
	cfg, err := s.engineConfig(l)
	if err != nil {
		return err
	}
	eng, err := engine.New(l.Model, cfg)
	if err != nil {
		return err
	}
	name := s.opts.ServedModelName
	if name == "" {
		name = l.Name
	}
	m := &served{
		name:      name,
		created:   time.Now().Unix(),
		loaded:    l,
		eng:       eng,
		tok:       l.Tokenizer,
		template:  tmpl,
		plainChat: tmpl == nil && l.TemplateErr == nil && (s.opts.PlainChat || hasStoriesTokenizer(l.Dir)),
		stopIDs:   l.StopIDs,
		vocab:     l.Model.Vocab(),
		texts:     newTokenTexts(l.Tokenizer),
		agent:     agent,
	}
	m.promptBytes = maxPromptBytes(l.Tokenizer, eng.MaxContext())
	if tmpl == nil {
		m.templateErr = l.TemplateErr // --chat-template replaces a broken one
	}
	for _, w := range l.Warnings {
		s.log.Warn("model load: " + w)
	}
	s.metrics.setCacheInfo(eng.Config())
	eng.Start()
	s.state.Store(m)
	c := eng.Config()
	s.log.Info("model ready", "model", name, "backend", l.Model.Backend().Name(), "ctx", eng.MaxContext(),
		"parallel", c.Parallel, "kv_blocks", c.NumBlocks, "block_size", c.BlockSize, "kv_dtype", c.KVDtype, "prefix_cache", eng.PrefixCaching(),
		"plain_chat", m.plainChat)
	if why := eng.PrefixCacheOff(); why != "" && why != "disabled" {
		s.log.Info("prefix caching off: " + why)
	}
	return nil
}

// DefaultKVTokensPerSeq bounds the default KV cache: tokens per parallel
// slot when neither --kv-blocks nor --kv-mem is given.
const DefaultKVTokensPerSeq = 4096

// engineConfig turns the options into an engine.Config, with the metrics
// hooks attached.
func (s *Server) engineConfig(l *app.Loaded) (engine.Config, error) {
	o := s.opts
	cfg := engine.Config{
		Parallel:         o.Parallel,
		MaxQueue:         o.MaxQueue,
		PrefillChunk:     o.PrefillChunk,
		MixedBatchTokens: o.MaxBatchedTokens,
		ITLTarget:        o.ITLTarget,
		MaxContext:       o.CtxSize,
		BlockSize:        o.BlockSize,
		NumBlocks:        o.KVBlocks,
		KVDtype:          o.KVCacheDtype,
		OnFinish:         s.metrics.onFinish,
		OnStep:           s.metrics.onStep,
	}
	// Prefix caching is on unless asked otherwise (the engine also turns
	// it off for models whose window layers use rings).
	cfg.DisablePrefixCache = o.NoPrefixCache
	if o.NoRunAhead {
		cfg.RunAhead = engine.RunAheadOff
	}
	if o.KVBlocks > 0 && o.KVMemMiB > 0 {
		return cfg, errors.New("server: give the KV cache size as blocks or as MiB, not both")
	}
	util := o.GPUMemoryUtilization
	if util == 0 {
		util = DefaultGPUMemoryUtilization
	}
	ctx := l.Model.MaxContext()
	if o.CtxSize > 0 {
		ctx = min(ctx, o.CtxSize)
	}
	if o.KVBlocks == 0 && o.KVMemMiB == 0 {
		bs := max(o.BlockSize, 1)
		// Sized as the engine will be: without prefix caching a model with
		// slot state keeps no snapshot places (engine.WithSnapshots).
		blocks, slots, note, ok, err := kvFromDeviceMemory(l, util, engine.Config{BlockSize: bs, Parallel: o.Parallel,
			PrefillChunk: cmp.Or(o.PrefillChunk, engine.DefaultPrefillChunkFor(l.Model.Backend())), KVDtype: o.KVCacheDtype,
			DisablePrefixCache: o.NoPrefixCache}, ctx)
		if err != nil {
			return cfg, err
		}
		if ok {
			cfg.NumBlocks, cfg.Parallel = blocks, slots
			s.log.Info(note)
			return cfg, nil
		}
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = engine.DefaultParallel
	}
	if o.KVBlocks == 0 && o.KVMemMiB == 0 {
		// Default budget: every slot can hold min(context, 4096) tokens.
		// Sizing for Parallel full contexts of a 128k-token model would
		// ask for hundreds of GiB; a longer sequence still runs, borrowing
		// blocks (the engine preempts when they run out).
		bs := max(o.BlockSize, 1)
		tokens := cfg.Parallel * min(ctx, DefaultKVTokensPerSeq)
		cfg.NumBlocks = (tokens + bs - 1) / bs
	}
	if o.KVMemMiB > 0 {
		bs := o.BlockSize
		if bs <= 0 {
			bs = 16 // kvcache.DefaultBlockSize
			cfg.BlockSize = bs
		}
		sizing := engine.Config{BlockSize: bs, Parallel: cfg.Parallel, PrefillChunk: o.PrefillChunk, KVDtype: o.KVCacheDtype,
			DisablePrefixCache: o.NoPrefixCache}
		n := engine.KVBlocksWithin(l.Model.Backend(), sizing, l.Model.KVLayers(), int64(o.KVMemMiB)<<20)
		if n < 1 {
			c := kvCost(l, sizing)
			return cfg, fmt.Errorf("server: --kv-mem %d MiB holds no KV block (one block of %d tokens is %s, beside %s of recurrent state for %d slots)",
				o.KVMemMiB, bs, byteSize(c.PerBlock), byteSize(c.Fixed), cfg.Parallel)
		}
		cfg.NumBlocks = n
	}
	return cfg, nil
}

// kvCost is the KV store the engine allocates for l under cfg, with every
// windowed layer paged: per block of the paged layers (those with K/V of
// their own, at the backend's element size), and fixed per slot (the
// recurrent state of linear-attention layers), as the backend counts it.
func kvCost(l *app.Loaded, cfg engine.Config) backend.KVCost {
	be := l.Model.Backend()
	cfg.NumBlocks = 0 // no blocks: no rings
	return backend.KVCostOf(be, engine.KVSpec(be, cfg, l.Model.KVLayers()))
}

// model returns the served model, or nil while loading.
func (s *Server) model() *served { return s.state.Load() }

// stats reads the engine's snapshot; zero while loading.
func (s *Server) stats() (engine.Stats, bool) {
	m := s.model()
	if m == nil {
		return engine.Stats{}, false
	}
	return m.eng.Stats(), true
}

// Engine is the running engine (nil while loading), for tests and tools.
func (s *Server) Engine() *engine.Engine {
	if m := s.model(); m != nil {
		return m.eng
	}
	return nil
}

// Close stops the engine: requests still running end with an error. The
// caller shuts the HTTP server down first (http.Server.Shutdown) so no new
// request arrives. The model's backend is the caller's to close.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	m := s.state.Load()
	s.mu.Unlock()
	if m != nil {
		m.eng.Stop()
	}
}
