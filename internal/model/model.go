// Package model builds decoder-only transformers out of backend ops. One
// file per architecture family; the shared blocks (attention, gated MLP,
// MoE) live in blocks.go. Model code never knows whether a weight is
// quantized: the loader decides from the checkpoint (<name>.scales).
package model

import (
	"fmt"
	"slices"
	"sort"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Layer is one decoder layer: it updates the residual stream x in place.
type Layer interface {
	Forward(s *Step, x backend.Tensor)
	KV() backend.KVLayer
}

// Source provides weights to a family's builder: a real checkpoint or a
// synthetic generator of the same shapes.
type Source interface {
	// Linear returns a (possibly quantized) matrix [out, in] or stacked
	// experts [experts, out, in].
	Linear(module string, shape ...int) (backend.Weight, error)
	// Dense returns a float tensor (norm weights, biases).
	Dense(name string, shape ...int) (backend.Weight, error)
	// Has reports whether a tensor exists (optional parts like biases).
	Has(name string) bool
}

// Family builds a model's layers and top-level weights.
type Family func(cfg *weights.Config, src Source, m *Model) error

var families = map[string]Family{}

// Register adds an architecture family under its config.json model_type.
func Register(modelType string, f Family) { families[modelType] = f }

// Supported lists model_types this build runs.
func Supported() []string {
	var out []string
	for k := range families {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Model is a loaded decoder.
type Model struct {
	Cfg     *weights.Config
	be      backend.Backend
	Embed   backend.Weight
	LMHead  backend.Weight // may equal Embed (tied)
	Norm    backend.Weight
	Layers  []Layer
	NormEps float32
	// EmbedScale multiplies embeddings (Gemma: sqrt(hidden)); 0 = none.
	EmbedScale float32
	// FinalSoftcap soft-caps the logits (Gemma); 0 = none.
	FinalSoftcap float32
	// Prepare runs after the embedding, before the first layer (Gemma 4's
	// per-layer inputs, computed from the embeddings); nil = nothing.
	Prepare func(s *Step, x backend.Tensor)

	buf *buffers
	fed []int32 // the last argmax ids, for FeedTokens on backends without AsyncArgmaxer

	// shard is set on one rank of a tensor-parallel model, group on the
	// model that drives the ranks (parallel.go).
	shard *rankShard
	group *rankGroup
}

// Backend is the device the model runs on.
func (m *Model) Backend() backend.Backend { return m.be }

// Vocab is the logits width (the whole vocabulary, also on a rank that
// holds a shard of it).
func (m *Model) Vocab() int {
	if m.shard != nil {
		return m.shard.vocab
	}
	return m.Cfg.Vocab
}

// MaxContext is the longest sequence the model supports. Yarn extends
// the original context by its factor: Qwen's model cards tell users to
// add a yarn rope_scaling block and leave max_position_embeddings at the
// original length, as vLLM then serves factor x original tokens.
func (m *Model) MaxContext() int { return ContextOf(m.Cfg) }

// ContextOf is the context a model of cfg supports (Model.MaxContext),
// from the config alone: the memory preflight sizes against it before
// any weight is read.
func ContextOf(cfg *weights.Config) int {
	n := cfg.MaxPosition
	if r := cfg.Rope; r.Type == "yarn" && r.Factor > 1 && r.OriginalMaxPosition > 0 {
		n = max(n, int(r.Factor*float64(r.OriginalMaxPosition)))
	}
	if n > 0 {
		return n
	}
	return 4096
}

// KVLayers describes the KV geometry of every layer, sliding windows
// included (KVLayer.Window), so the KV store can bound windowed layers.
func (m *Model) KVLayers() []backend.KVLayer {
	if m.group != nil {
		return m.group.kvLayers()
	}
	out := make([]backend.KVLayer, len(m.Layers))
	for i, l := range m.Layers {
		out[i] = l.KV()
	}
	return out
}

// Build creates a model of cfg's architecture from src on be.
func Build(cfg *weights.Config, src Source, be backend.Backend) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f, ok := families[familyType(cfg)]
	if !ok {
		return nil, fmt.Errorf("unsupported architecture %q (supported: %v)", cfg.ModelType, Supported())
	}
	m := &Model{Cfg: cfg, be: be, NormEps: float32(cfg.RMSNormEps)}
	if err := f(cfg, src, m); err != nil {
		return nil, err
	}
	return m, nil
}

// Step is what a layer sees during one forward step: the backend, the KV
// store, the token count and scratch buffers sized for it.
type Step struct {
	B     backend.Backend
	KV    backend.KVStore
	N     int
	Layer int
	buf   *buffers
	comm  backend.Comm // the rank's group under tensor parallelism; nil alone
}

// AllReduce sums a row-parallel block's partial output over the ranks
// of a tensor-parallel model; alone it does nothing.
func (s *Step) AllReduce(t backend.Tensor) {
	if s.comm != nil {
		s.comm.AllReduce(t)
	}
}

// Scratch returns a [N, cols] activation for temporary use; slot names
// keep distinct uses apart (each slot is one buffer reused every layer).
func (s *Step) Scratch(slot string, cols int) backend.Tensor {
	return s.buf.get(s.B, slot, s.N, cols)
}

// buffers holds activations reused across steps, grown on demand, so a
// steady-state step allocates nothing (and a GPU backend sees stable
// pointers it can capture in a graph). The first n rows of each buffer are
// kept too: a decode step asks for the same n every time, and the lookup
// runs for every layer while a GPU waits for the step to be recorded.
type buffers struct {
	rows int
	m    map[bufKey]*buffer
}

type bufKey struct {
	slot string
	cols int
}

type buffer struct {
	t, rows backend.Tensor // the allocation, and its first n rows
	n       int
}

func (b *buffers) get(be backend.Backend, slot string, n, cols int) backend.Tensor {
	key := bufKey{slot, cols}
	e := b.m[key]
	if e == nil || e.t.Rows() < n {
		e = &buffer{t: be.NewTensor(max(n, b.rows), cols), n: -1}
		b.m[key] = e
	}
	if e.n != n {
		e.rows, e.n = be.Slice(e.t, 0, n), n
	}
	return e.rows
}

// Reserve sizes the activation buffers for steps of up to n tokens.
func (m *Model) Reserve(n int) {
	if m.buf == nil {
		m.buf = &buffers{m: map[bufKey]*buffer{}}
	}
	if n > m.buf.rows {
		m.buf.rows = n
	}
	if m.group != nil {
		for _, r := range m.group.ranks {
			r.Reserve(n)
		}
	}
}

// Forward runs one step and returns the logits of b.LogitRows, row-major
// [len(LogitRows), Vocab].
func (m *Model) Forward(b *backend.Batch, kv backend.KVStore) ([]float32, error) {
	logits, err := m.forward(b, kv)
	if err != nil || logits == nil {
		return nil, err
	}
	out := make([]float32, logits.Rows()*logits.Cols())
	m.be.ReadRows(logits, out)
	return out, m.be.Sync()
}

// ForwardArgmax runs one step and returns the argmax token of each of
// b.LogitRows. Greedy decoding needs nothing else, and on a GPU copying
// back one id per row instead of a vocabulary of logits saves a transfer
// per step.
func (m *Model) ForwardArgmax(b *backend.Batch, kv backend.KVStore) ([]int32, error) {
	logits, err := m.forward(b, kv)
	if err != nil || logits == nil {
		return nil, err
	}
	ids := m.be.Argmax(logits)
	if _, async := m.be.(backend.AsyncArgmaxer); !async {
		m.fed = ids
	}
	return ids, m.be.Sync()
}

// CanSampleRows reports whether the backend samples logit rows itself
// (backend.RowSampler), so ForwardSample can run.
func (m *Model) CanSampleRows() bool {
	_, ok := m.be.(backend.RowSampler)
	return ok
}

// ForwardSample runs one step and samples each of b.LogitRows with rows
// on the backend: only the ids and the logprobs asked for come back, as
// ForwardArgmax's ids do (the logits of the rows stay where they are).
func (m *Model) ForwardSample(b *backend.Batch, kv backend.KVStore, rows []backend.SampleRow) ([]backend.Sampled, error) {
	return m.ForwardSamplePrepared(b, kv, func() ([]backend.SampleRow, error) { return rows, nil })
}

// ForwardSamplePrepared is ForwardSample with the rows supplied by
// prepare, called once the step's forward is on its way: on a
// backend.PreparedRowSampler the device runs the forward while prepare
// works (a constrained row's mask, which needs only the tokens so far),
// and the sampling follows. A prepare failure ends the step with it.
func (m *Model) ForwardSamplePrepared(b *backend.Batch, kv backend.KVStore, prepare func() ([]backend.SampleRow, error)) ([]backend.Sampled, error) {
	rs, ok := m.be.(backend.RowSampler)
	if !ok {
		return nil, fmt.Errorf("backend %s does not sample rows", m.be.Name())
	}
	logits, err := m.forward(b, kv)
	if err != nil || logits == nil {
		return nil, err
	}
	if p, ok := m.be.(backend.PreparedRowSampler); ok {
		p.LaunchRecorded()
	}
	rows, err := prepare()
	if err == nil && len(rows) != len(b.LogitRows) {
		err = fmt.Errorf("%d sampling rows for %d logit rows", len(rows), len(b.LogitRows))
	}
	if err != nil {
		_ = m.be.Sync() // the forward's writes land; its own failure is secondary
		return nil, err
	}
	res, err := rs.SampleRows(logits, rows)
	if err != nil {
		return nil, err
	}
	m.keepFed(res)
	return res, m.be.Sync()
}

// keepFed keeps a sampled step's ids for the FeedTokens of the next step
// on a backend that does not resolve them itself.
func (m *Model) keepFed(res []backend.Sampled) {
	if _, async := m.be.(backend.AsyncArgmaxer); async {
		return
	}
	m.fed = make([]int32, len(res))
	for i, r := range res {
		m.fed[i] = r.ID
	}
}

// ForwardArgmaxAsync queues one step and its argmax without waiting for
// the ids; Wait on the result returns them. The next step may name them
// with backend.FeedToken before they arrive, so a greedy decode loop keeps
// one step queued ahead of the one it waits for. Backends without
// AsyncArgmaxer run the step synchronously and resolve FeedTokens on the
// host: the same ids, without the overlap.
func (m *Model) ForwardArgmaxAsync(b *backend.Batch, kv backend.KVStore) (backend.PendingIDs, error) {
	a, async := m.be.(backend.AsyncArgmaxer)
	if !async {
		b, err := m.resolveFed(b)
		if err != nil {
			return nil, err
		}
		ids, err := m.ForwardArgmax(b, kv)
		return backend.ReadyIDs{IDs: ids, Err: err}, err
	}
	logits, err := m.forward(b, kv)
	if err != nil {
		return nil, err
	}
	if logits == nil {
		return backend.ReadyIDs{}, nil
	}
	return a.ArgmaxAsync(logits), nil
}

// ForwardSampleAsync is ForwardSample without waiting for the tokens, as
// ForwardArgmaxAsync is ForwardArgmax: the next step may name them with
// backend.FeedToken. rows is only read during the call. Backends without
// AsyncRowSampler run the step synchronously and resolve FeedTokens on
// the host.
func (m *Model) ForwardSampleAsync(b *backend.Batch, kv backend.KVStore, rows []backend.SampleRow) (backend.PendingSamples, error) {
	a, async := m.be.(backend.AsyncRowSampler)
	if !async {
		b, err := m.resolveFed(b)
		if err != nil {
			return nil, err
		}
		res, err := m.ForwardSample(b, kv, rows)
		return backend.ReadySamples{Rows: res, Err: err}, err
	}
	if len(rows) != len(b.LogitRows) {
		return nil, fmt.Errorf("%d sampling rows for %d logit rows", len(rows), len(b.LogitRows))
	}
	logits, err := m.forward(b, kv)
	if err != nil {
		return nil, err
	}
	if logits == nil {
		return backend.ReadySamples{}, nil
	}
	return a.SampleRowsAsync(logits, rows), nil
}

// ForwardQueued queues one step's forward and returns its logits where
// they are, for SampleQueued once the rows' parameters are known: a
// constrained row's mask, or a penalised row's history, needs the
// previous step's token, which this step may name with a FeedToken. The
// logits stay valid until the next step is recorded; sample them first.
func (m *Model) ForwardQueued(b *backend.Batch, kv backend.KVStore) (backend.Tensor, error) {
	if _, ok := m.be.(backend.RowSampler); !ok || len(b.LogitRows) == 0 {
		return nil, fmt.Errorf("backend %s does not sample rows, or the step has no logit rows", m.be.Name())
	}
	b, err := m.resolveFed(b)
	if err != nil {
		return nil, err
	}
	logits, err := m.forward(b, kv)
	if err != nil {
		return nil, err
	}
	if p, ok := m.be.(backend.PreparedRowSampler); ok {
		p.LaunchRecorded()
	}
	return logits, nil
}

// SampleQueued samples ForwardQueued's logits with rows, without waiting
// on a backend.AsyncRowSampler (synchronously elsewhere); the ids become
// the rows the next step's FeedTokens name.
func (m *Model) SampleQueued(logits backend.Tensor, rows []backend.SampleRow) (backend.PendingSamples, error) {
	if a, ok := m.be.(backend.AsyncRowSampler); ok {
		return a.SampleRowsAsync(logits, rows), nil
	}
	res, err := m.be.(backend.RowSampler).SampleRows(logits, rows)
	if err == nil {
		m.keepFed(res)
		err = m.be.Sync()
	}
	return backend.ReadySamples{Rows: res, Err: err}, err
}

// resolveFed replaces b's FeedTokens with the last step's ids kept on the
// host (backends without AsyncArgmaxer); b itself is left as it is.
func (m *Model) resolveFed(b *backend.Batch) (*backend.Batch, error) {
	if _, async := m.be.(backend.AsyncArgmaxer); async || !slices.ContainsFunc(b.Tokens, func(id int32) bool { return id < 0 }) {
		return b, nil
	}
	resolved := *b
	resolved.Tokens = slices.Clone(b.Tokens)
	for i, id := range resolved.Tokens {
		if j, fed := backend.FedRow(id); fed {
			if j >= len(m.fed) {
				return nil, fmt.Errorf("feed token for argmax row %d, but the last argmax had %d rows", j, len(m.fed))
			}
			// A non-finite row's successor embeds token 0: the
			// engine fails that request and drops the step's result.
			resolved.Tokens[i] = max(m.fed[j], 0)
		}
	}
	return &resolved, nil
}

// forward runs the layers and the head; it returns nil when no logits
// were asked for.
func (m *Model) forward(b *backend.Batch, kv backend.KVStore) (backend.Tensor, error) {
	if m.group != nil {
		return m.group.forward(b, kv)
	}
	n := len(b.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("empty batch")
	}
	_, feeds := m.be.(backend.AsyncArgmaxer)
	for _, id := range b.Tokens {
		if _, fed := backend.FedRow(id); fed && feeds {
			continue // the backend checks the row it names
		}
		if id < 0 || int(id) >= m.Vocab() {
			return nil, fmt.Errorf("token id %d outside the vocabulary (%d)", id, m.Vocab())
		}
	}
	m.Reserve(n)
	be := m.be
	if err := be.BeginStep(b); err != nil {
		return nil, err
	}
	s := &Step{B: be, KV: kv, N: n, buf: m.buf}
	x := s.Scratch("x", m.Cfg.Hidden)
	if m.shard != nil {
		s.comm = m.shard.comm
		m.shard.embed.EmbedShard(x, m.Embed, m.shard.vocabLo)
		s.AllReduce(x)
	} else {
		be.Embed(x, m.Embed)
	}
	if m.EmbedScale != 0 {
		be.Scale(x, m.EmbedScale)
	}
	if m.Prepare != nil {
		m.Prepare(s, x)
	}
	for i, l := range m.Layers {
		s.Layer = i
		l.Forward(s, x)
	}
	rows := len(b.LogitRows)
	if rows == 0 {
		return nil, be.Sync()
	}
	last := m.buf.get(be, "logit_in", rows, m.Cfg.Hidden)
	be.GatherLogitRows(last, x)
	be.RMSNorm(last, last, m.Norm, m.NormEps)
	logits := m.buf.get(be, "logits", rows, m.Cfg.Vocab)
	be.Linear(logits, last, m.LMHead, nil)
	if m.FinalSoftcap != 0 {
		be.Softcap(logits, m.FinalSoftcap)
	}
	if m.shard != nil {
		full := m.buf.get(be, "logits.full", rows, m.shard.vocab)
		m.shard.comm.AllGather(full, logits)
		logits = full
	}
	return logits, nil
}
