package model

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/tp"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Tensor parallelism (docs/tensor-parallel.md): N rank models, each the
// ordinary family code built on its own backend from a config with the
// rank's share of the heads, MLP and vocabulary, holding only its shards
// of the weights. The blocks all-reduce after their row-parallel
// projections (Step.AllReduce), the embedding is summed over the
// vocabulary shards and the LM head's shards are gathered. A leader
// Model drives the ranks, one goroutine each, and looks like any other
// model to the engine.

// rankShard is what a rank model knows of its place in the group.
type rankShard struct {
	comm    backend.Comm
	embed   backend.ShardEmbedder
	vocabLo int // the first token of the rank's vocabulary shard
	vocab   int // the whole vocabulary
}

// rankGroup is the leader's view of its ranks.
type rankGroup struct {
	ranks []*Model
}

// LoadParallel loads dir as a tensor-parallel model over the ranks'
// backends, comms[r] being rank r's handle on their collectives. The
// result runs a step on every rank and returns rank 0's logits (its
// Backend is rank 0's, with KV stores made on every rank).
func LoadParallel(dir string, ranks []backend.Backend, comms []backend.Comm, opts LoadOptions) (*Model, error) {
	n := len(ranks)
	if len(comms) != n {
		return nil, fmt.Errorf("%d backends but %d comms", n, len(comms))
	}
	cfg, err := weights.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ck, err := weights.Open(dir, cfg.Quant)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	plan, err := planParallel(cfg, n, ck)
	if err != nil {
		return nil, fmt.Errorf("%s: tensor parallel %d: %v", dir, n, err)
	}
	g := &rankGroup{}
	for r, be := range ranks {
		embed, ok := be.(backend.ShardEmbedder)
		if !ok {
			return nil, fmt.Errorf("the %s backend cannot embed from a vocabulary shard (tensor parallelism)", be.Name())
		}
		if cfg.NumExperts > 0 && !backend.Supports(be, backend.FeatureExpertShard) {
			return nil, fmt.Errorf("the %s backend does not run %s", be.Name(), backend.FeatureExpertShard)
		}
		src := &shardSource{c: &checkpointSource{ck: ck, be: be, onTensor: opts.Progress}, plan: plan, rank: r}
		m, err := Build(rankConfig(cfg, plan.Rank[r], n), src, be)
		if err != nil {
			return nil, fmt.Errorf("%s: rank %d of %d: %v", dir, r, n, err)
		}
		m.shard = &rankShard{comm: comms[r], embed: embed, vocabLo: plan.Rank[r].VocabLo, vocab: cfg.Vocab}
		g.ranks = append(g.ranks, m)
	}
	if unused := ck.Unused(); len(unused) > 0 {
		return nil, fmt.Errorf("%s: %d tensors of the checkpoint are not used by the %s model (a weight it would silently drop): %s",
			dir, len(unused), cfg.ModelType, listSome(unused, 8))
	}
	r0 := g.ranks[0]
	return &Model{Cfg: cfg, be: &groupBackend{Backend: ranks[0], g: g}, NormEps: r0.NormEps, group: g}, nil
}

// rankConfig is cfg with one rank's share of the heads, MLP and
// vocabulary: the family builder then asks for exactly the rank's shards.
// The experts stay whole (the router routes over all of them); the
// source says which the rank holds (shardSource.ExpertRange).
func rankConfig(cfg *weights.Config, r tp.Rank, n int) *weights.Config {
	c := *cfg
	c.Heads, c.KVHeads, c.Intermediate, c.Vocab = r.Heads, r.KVHeads, r.Intermediate, r.VocabHi-r.VocabLo
	rankKV := func(kv int) int { return max(kv/n, 1) } // the plan's rule: split, or one replicated head
	if cfg.PerLayer != nil {
		c.PerLayer = map[int]weights.LayerOverride{}
		for i, o := range cfg.PerLayer {
			if o.KVHeads > 0 {
				o.KVHeads = rankKV(o.KVHeads)
			}
			c.PerLayer[i] = o
		}
	}
	if c.GlobalKVHeads > 0 {
		c.GlobalKVHeads = rankKV(c.GlobalKVHeads)
	}
	if r.LinearVHeads > 0 { // Qwen3.5 reads its linear heads from the raw config
		c.Raw = maps.Clone(cfg.Raw)
		c.Raw["linear_num_key_heads"], c.Raw["linear_num_value_heads"] = float64(r.LinearKHeads), float64(r.LinearVHeads)
	}
	return &c
}

// planParallel plans cfg over n ranks with each layer's geometry as its
// family builds it: Gemma 4's full layers have their own head dim and kv
// heads, Qwen3.5's layers are linear or gated attention; the others take
// the config's (tp.New).
func planParallel(cfg *weights.Config, n int, ck *weights.Checkpoint) (*tp.Plan, error) {
	mt := cfg.ModelType
	if t, ok := cfg.Raw["text_model_type"].(string); ok {
		mt = t
	}
	switch mt {
	case "qwen3_5", "qwen3_5_text":
		return planQwen35(cfg, n, ck)
	case "gemma4", "gemma4_text":
	default:
		return tp.New(cfg, n)
	}
	num := func(k string) float64 { f, _ := cfg.Raw[k].(float64); return f }
	switch {
	case num("hidden_size_per_layer_input") > 0:
		return nil, fmt.Errorf("gemma4's per-layer inputs (hidden_size_per_layer_input) do not split yet")
	case num("num_kv_shared_layers") > 0:
		return nil, fmt.Errorf("gemma4's KV-shared layers (num_kv_shared_layers) do not split yet")
	}
	types, err := gemma4LayerTypes(cfg)
	if err != nil {
		return nil, err
	}
	layers := make([]tp.Layer, len(types))
	for i, typ := range types {
		layers[i].HeadDim, layers[i].KVHeads = gemma4Geometry(cfg, i, typ == "sliding_attention")
	}
	return tp.NewLayers(cfg, n, layers)
}

// planQwen35 plans Qwen3.5's dense layers: Gated DeltaNet ones by their
// key and value heads (the conv's stored shape read off the checkpoint,
// whose layout the builder also goes by), full ones with the gated q_proj.
func planQwen35(cfg *weights.Config, n int, ck *weights.Checkpoint) (*tp.Plan, error) {
	types, err := qwen35LayerTypes(cfg)
	if err != nil {
		return nil, err
	}
	dp := qwen35DeltaNetParams(cfg)
	layers := make([]tp.Layer, len(types))
	for i, typ := range types {
		layers[i] = tp.Layer{HeadDim: cfg.HeadDim, KVHeads: cfg.KVHeads, GatedQ: true}
		if typ != "linear_attention" {
			continue
		}
		name := fmt.Sprintf("model.layers.%d.linear_attn.conv1d.weight", i)
		ti, _, ok := ck.Info(name)
		if !ok {
			return nil, fmt.Errorf("%s: missing", name)
		}
		layers[i].DeltaNet = &tp.DeltaNet{KHeads: dp.KHeads, VHeads: dp.VHeads, KDim: dp.KDim, VDim: dp.VDim, ConvShape: ti.Shape}
	}
	return tp.NewLayers(cfg, n, layers)
}

// forward runs the step on every rank at once (their collectives meet)
// and returns rank 0's logits, which every rank holds after the gather.
func (g *rankGroup) forward(b *backend.Batch, kv backend.KVStore) (backend.Tensor, error) {
	gk, ok := kv.(*groupKV)
	if !ok || len(gk.stores) != len(g.ranks) {
		return nil, fmt.Errorf("a tensor-parallel model needs a KV store made by its Backend")
	}
	out := make([]backend.Tensor, len(g.ranks))
	errs := make([]error, len(g.ranks))
	var wg sync.WaitGroup
	for r, m := range g.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[r], errs[r] = m.forward(b, gk.stores[r])
		}()
	}
	wg.Wait()
	return out[0], errors.Join(errs...)
}

// kvLayers is the group's KV geometry: per layer, the kv heads of every
// rank together (a replicated head counted on each rank that holds it),
// which is the memory the group's stores take.
func (g *rankGroup) kvLayers() []backend.KVLayer {
	out := slices.Clone(g.ranks[0].KVLayers())
	for _, m := range g.ranks[1:] {
		for i, l := range m.KVLayers() {
			out[i].KVHeads += l.KVHeads
			out[i].DeltaNet.KHeads += l.DeltaNet.KHeads // each rank's recurrent state is of its heads
			out[i].DeltaNet.VHeads += l.DeltaNet.VHeads
		}
	}
	return out
}

// groupBackend is rank 0's backend (where the leader's logits are) that
// makes KV stores, syncs and closes on every rank.
type groupBackend struct {
	backend.Backend
	g *rankGroup
}

// groupKV is one KV store per rank, each with the rank's kv heads.
type groupKV struct {
	spec   backend.KVSpec
	stores []backend.KVStore
}

func (k *groupKV) Spec() backend.KVSpec { return k.spec }

// NewKVStore makes each rank's store with spec's blocks and slots and the
// layers of that rank (the spec's are the group's, Model.KVLayers).
func (gb *groupBackend) NewKVStore(spec backend.KVSpec) (backend.KVStore, error) {
	kv := &groupKV{spec: spec}
	for r, m := range gb.g.ranks {
		rs := spec
		rs.Layers = m.KVLayers()
		s, err := m.be.NewKVStore(rs)
		if err != nil {
			return nil, fmt.Errorf("rank %d: %v", r, err)
		}
		kv.stores = append(kv.stores, s)
	}
	return kv, nil
}

func (gb *groupBackend) Sync() error {
	var errs []error
	for _, m := range gb.g.ranks {
		errs = append(errs, m.be.Sync())
	}
	return errors.Join(errs...)
}

func (gb *groupBackend) Close() error {
	var errs []error
	for _, m := range gb.g.ranks {
		errs = append(errs, m.be.Close())
	}
	return errors.Join(errs...)
}

// shardSource hands a rank's family builder its shards: each asked-for
// tensor is read whole from the checkpoint, cut by the plan on the host
// and only the cut uploaded. The builder asks with the rank's shapes
// (rankConfig), which are checked against the plan's.
type shardSource struct {
	c    *checkpointSource
	plan *tp.Plan
	rank int
}

// Has hides a row-parallel bias from every rank but 0: the all-reduce
// would add it once per rank.
func (s *shardSource) Has(name string) bool {
	if b, ok := s.plan.Bias(name); ok && b.Rank0 && s.rank != 0 {
		return false
	}
	return s.c.Has(name)
}

func (s *shardSource) Linear(module string, shape ...int) (backend.Weight, error) {
	h, err := s.HostLinear(module, shape...)
	if err != nil {
		return nil, err
	}
	return s.c.upload(h)
}

// HostLinear is Linear before the upload (Qwen3.5's gated q_proj is split
// into query and gate on the host, loadQueryGate).
func (s *shardSource) HostLinear(module string, shape ...int) (*tensor.Host, error) {
	t, ok := s.plan.Lookup(module)
	if !ok || !t.Linear {
		return nil, fmt.Errorf("%s: a matrix the tensor-parallel plan does not know", module)
	}
	if err := s.check(t, shape); err != nil {
		return nil, err
	}
	h, err := s.c.ck.Linear(module, t.Shape...)
	if err != nil {
		return nil, err
	}
	return tp.Slice(h, t, s.rank)
}

// TensorShape is the whole stored shape: Qwen3.5 tells mlx-lm's layout
// from it, which is the same for every shard.
func (s *shardSource) TensorShape(name string) ([]int, bool) { return s.c.TensorShape(name) }

func (s *shardSource) Dense(name string, shape ...int) (backend.Weight, error) {
	h, err := s.HostDense(name, shape...)
	if err != nil {
		return nil, err
	}
	return s.c.upload(h)
}

// HostDense is Dense before the upload: the rank's shard of a float
// tensor on the host (Gemma 3's norms are offset there, hostReader).
func (s *shardSource) HostDense(name string, shape ...int) (*tensor.Host, error) {
	t, ok := s.plan.Lookup(name)
	if !ok {
		if t, ok = s.plan.Bias(name); !ok {
			t = &tp.Tensor{Name: name, Shape: shape} // replicated: norms
		}
	}
	if t.Linear {
		return nil, fmt.Errorf("%s: a planned matrix read as a dense tensor", name)
	}
	if err := s.check(t, shape); err != nil {
		return nil, err
	}
	h, err := s.c.ck.Dense(name, t.Shape...)
	if err != nil {
		return nil, err
	}
	return tp.Slice(h, t, s.rank)
}

// UploadHost uploads a tensor the family derived from its HostDense shard.
func (s *shardSource) UploadHost(h *tensor.Host, stored int64) (backend.Weight, error) {
	return s.c.UploadHost(h, stored)
}

// HostMXFP4 refuses: openai's MXFP4 experts are not cut per rank yet
// (the plan refuses floating-point quantized configs before this).
func (s *shardSource) HostMXFP4(name string, shape ...int) (*tensor.Host, error) {
	return nil, fmt.Errorf("%s: MXFP4 experts do not split over ranks yet (tensor parallelism)", name)
}

// ExpertRange is the rank's experts of every MoE block (expert parallel).
func (s *shardSource) ExpertRange() (lo, hi int) {
	r := s.plan.Rank[s.rank]
	return r.ExpertLo, r.ExpertHi
}

// StackedLinear stacks the rank's experts of a per-expert checkpoint
// (HF naming): modules must be exactly experts [ExpertLo, ExpertHi) of a
// block the plan splits by expert.
func (s *shardSource) StackedLinear(modules []string, out, in int) (backend.Weight, error) {
	lo, hi := s.ExpertRange()
	if len(modules) != hi-lo {
		return nil, fmt.Errorf("rank %d holds experts [%d, %d), the builder stacks %d", s.rank, lo, hi, len(modules))
	}
	for i, m := range modules {
		blk, rest, ok := strings.Cut(m, ".experts.")
		if _, planned := s.plan.Lookup(blk + ".switch_mlp.gate_proj"); !ok || !planned ||
			!strings.HasPrefix(rest, strconv.Itoa(lo+i)+".") {
			return nil, fmt.Errorf("%s: not expert %d of a block the tensor-parallel plan splits by expert", m, lo+i)
		}
	}
	return s.c.StackedLinear(modules, out, in)
}

// check catches a builder whose shapes disagree with the plan (a family
// that derives a width the plan does not split the same way).
func (s *shardSource) check(t *tp.Tensor, shape []int) error {
	if want := t.ShardShape(s.rank); !slices.Equal(shape, want) {
		return fmt.Errorf("%s: rank %d's builder asks for %v, the plan gives it %v", t.Name, s.rank, shape, want)
	}
	return nil
}

// Ignore passes the family's knowingly unused tensors to the checkpoint.
func (s *shardSource) Ignore(names ...string) { s.c.Ignore(names...) }
