package model

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/mlxcel/mlxcel/internal/backend"
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
	plan, err := tp.New(cfg, n)
	if err != nil {
		return nil, fmt.Errorf("%s: tensor parallel %d: %v", dir, n, err)
	}
	ck, err := weights.Open(dir, cfg.Quant)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	g := &rankGroup{}
	for r, be := range ranks {
		embed, ok := be.(backend.ShardEmbedder)
		if !ok {
			return nil, fmt.Errorf("the %s backend cannot embed from a vocabulary shard (tensor parallelism)", be.Name())
		}
		src := &shardSource{c: &checkpointSource{ck: ck, be: be, onTensor: opts.Progress}, plan: plan, rank: r}
		m, err := Build(rankConfig(cfg, plan.Rank[r]), src, be)
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
func rankConfig(cfg *weights.Config, r tp.Rank) *weights.Config {
	c := *cfg
	c.Heads, c.KVHeads, c.Intermediate, c.Vocab = r.Heads, r.KVHeads, r.Intermediate, r.VocabHi-r.VocabLo
	return &c
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
	if h, err = tp.Slice(h, t, s.rank); err != nil {
		return nil, err
	}
	return s.c.upload(h)
}

func (s *shardSource) Dense(name string, shape ...int) (backend.Weight, error) {
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
	if h, err = tp.Slice(h, t, s.rank); err != nil {
		return nil, err
	}
	return s.c.upload(h)
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
