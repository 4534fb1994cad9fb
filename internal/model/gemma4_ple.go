package model

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Gemma 4's E-series (E2B, E4B), as transformers' Gemma4TextModel runs it:
//
//   - per-layer inputs: before the first layer, each layer i gets
//     pli_i = (rmsnorm(proj_i(e) * hidden^-0.5) + emb_i(ids) * sqrt(P)) * 2^-0.5,
//     where e is the scaled token embedding, proj_i rows [iP, (i+1)P) of
//     per_layer_model_projection and emb_i columns [iP, (i+1)P) of
//     embed_tokens_per_layer (P = hidden_size_per_layer_input). The packed
//     tables are cut into per-layer blocks on the host at load, so the
//     backend runs plain Embed and Linear ops on contiguous tensors. After
//     its feed-forward half, layer i adds
//     post_norm(per_layer_projection(act(per_layer_input_gate(x)) * pli_i)),
//     before layer_scalar;
//   - KV sharing: the last num_kv_shared_layers layers have no k/v
//     projections and attend over the K/V of the last earlier layer of
//     their type (backend.FeatureSharedKV; the KV store keeps nothing for
//     them, KVLayer.Shared). With use_double_wide_mlp their MLP is twice
//     intermediate_size wide.

// perLayerInput is one layer's per-layer input block.
type perLayerInput struct {
	gate, proj, postNorm backend.Weight
	act                  backend.Activation
	slot                 string // scratch slot holding pli_i (gemma4PLE.prepare)
	dim                  int
}

// forward adds the block's output to x; o is hidden-wide scratch.
func (p *perLayerInput) forward(s *Step, x, o backend.Tensor, eps float32) {
	b := s.B
	g := s.Scratch("ple.g", p.dim)
	b.Linear(g, x, p.gate, nil)
	b.GatedAct(g, g, s.Scratch(p.slot, p.dim), p.act)
	b.Linear(o, g, p.proj, nil)
	b.RMSNorm(o, o, p.postNorm, eps)
	b.Add(x, x, o)
}

// gemma4PLE is the model-level half: the per-layer tables and the norm.
type gemma4PLE struct {
	embed, proj []backend.Weight
	norm        backend.Weight
	slots       []string
	dim         int
	hidden      int
	eps         float32
}

// prepare writes every layer's pli_i from the scaled embeddings x.
func (g *gemma4PLE) prepare(s *Step, x backend.Tensor) {
	b := s.B
	p := s.Scratch("ple.p", g.dim)
	for i, slot := range g.slots {
		t := s.Scratch(slot, g.dim)
		b.Embed(t, g.embed[i])
		b.Scale(t, float32(math.Sqrt(float64(g.dim))))
		b.Linear(p, x, g.proj[i], nil)
		b.Scale(p, float32(1/math.Sqrt(float64(g.hidden))))
		b.RMSNorm(p, p, g.norm, g.eps)
		b.Add(t, t, p)
		b.Scale(t, float32(1/math.Sqrt2))
	}
}

// hostLinearSource hands out (possibly quantized) matrices before upload.
type hostLinearSource interface {
	hostUploader
	HostLinear(module string, shape ...int) (*tensor.Host, error)
}

// loadGemma4PLE reads the model-level tables into m.Prepare and returns
// the per-layer loader, or nil without hidden_size_per_layer_input.
func loadGemma4PLE(cfg *weights.Config, src Source, m *Model, act backend.Activation) (func(int, string) (*perLayerInput, error), error) {
	num := func(k string) int { f, _ := cfg.Raw[k].(float64); return int(f) }
	P, L, H := num("hidden_size_per_layer_input"), cfg.Layers, cfg.Hidden
	if P <= 0 {
		return nil, nil
	}
	if v := num("vocab_size_per_layer_input"); v != 0 && v != cfg.Vocab {
		return nil, fmt.Errorf("gemma4: vocab_size_per_layer_input %d differs from vocab_size %d", v, cfg.Vocab)
	}
	hs, ok := src.(hostLinearSource)
	if !ok {
		return nil, fmt.Errorf("gemma4: per-layer inputs need a source that can split tensors on the host")
	}
	g := &gemma4PLE{dim: P, hidden: H, eps: float32(cfg.RMSNormEps)}
	for _, t := range []struct {
		dst        *[]backend.Weight
		name       string
		rows, cols int
		split      func(*tensor.Host, int) ([]*tensor.Host, error)
	}{{&g.embed, "model.embed_tokens_per_layer", cfg.Vocab, L * P, weights.SplitColumns},
		{&g.proj, "model.per_layer_model_projection", L * P, H, weights.SplitRowBlocks}} {
		h, err := hs.HostLinear(t.name, t.rows, t.cols)
		if err != nil {
			return nil, err
		}
		parts, err := t.split(h, L)
		if err != nil {
			return nil, err
		}
		for _, part := range parts {
			w, err := uploadRearranged(hs, part)
			if err != nil {
				return nil, err
			}
			*t.dst = append(*t.dst, w)
		}
	}
	var err error
	if g.norm, err = src.Dense("model.per_layer_projection_norm.weight", P); err != nil {
		return nil, err
	}
	for i := range L {
		g.slots = append(g.slots, fmt.Sprintf("ple.%d", i))
	}
	m.Prepare = g.prepare
	return func(i int, prefix string) (*perLayerInput, error) {
		l := &perLayerInput{act: act, slot: g.slots[i], dim: P}
		var err error
		if l.gate, err = src.Linear(prefix+".per_layer_input_gate", P, H); err != nil {
			return nil, err
		}
		if l.proj, err = src.Linear(prefix+".per_layer_projection", H, P); err != nil {
			return nil, err
		}
		if l.postNorm, err = src.Dense(prefix+".post_per_layer_input_norm.weight", H); err != nil {
			return nil, err
		}
		return l, nil
	}, nil
}

// gemma4KVFrom returns, for each layer, the layer whose K/V it reads
// (transformers: the last layer of its type before the first of the
// num_kv_shared_layers last layers), or -1; nil without sharing.
func gemma4KVFrom(cfg *weights.Config, types []string) ([]int, error) {
	f, _ := cfg.Raw["num_kv_shared_layers"].(float64)
	shared := int(f)
	if shared <= 0 {
		return nil, nil
	}
	first := len(types) - shared
	if first <= 0 {
		return nil, fmt.Errorf("gemma4: num_kv_shared_layers %d leaves no layer with its own KV", shared)
	}
	from := make([]int, len(types))
	for i := range from {
		from[i] = -1
		if i < first {
			continue
		}
		for j := first - 1; j >= 0; j-- {
			if types[j] == types[i] {
				from[i] = j
				break
			}
		}
		if from[i] < 0 {
			return nil, fmt.Errorf("gemma4: KV-shared layer %d (%s) has no earlier layer of its type", i, types[i])
		}
	}
	return from, nil
}
