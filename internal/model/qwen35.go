package model

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Qwen3.5 / Qwen3.6 text decoders, dense (qwen3_5_text) and MoE
// (qwen3_5_moe_text), following transformers' modeling_qwen3_5.py and
// modeling_qwen3_5_moe.py; the multimodal qwen3_5 / qwen3_5_moe run their
// text_config (the vision tower is skipped by the checkpoint reader):
//
//   - Llama-style pre-norm layers (llamaLayer) whose token mixer is, per
//     layer_types (else every full_attention_interval-th layer full),
//     either Gated DeltaNet linear attention (qwen35_deltanet.go, with a
//     recurrent state per sequence) or gated full attention;
//   - full attention: q_proj gives each head's query and an output gate
//     (split at load into Attention.Q and OutGate), q/k RMSNorm per head,
//     partial rotary (partial_rotary_factor of head_dim), output times
//     sigmoid(gate) before o_proj. The text model's mrope sections all see
//     the same positions, so it is plain RoPE;
//   - RMSNorms scale by 1+w (layer, final and q/k norms; not the gated norm
//     of the linear layers). transformers stores w; mlx-lm stores w+1 and
//     its depthwise conv as [channels, kernel, 1], which is how a converted
//     checkpoint is told apart (as mlx-lm's sanitize does);
//   - MoE: softmax over the experts, top-k always renormalised, plus a
//     shared expert scaled by sigmoid(shared_expert_gate(x)) on every token.
func init() {
	for _, t := range []string{"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"} {
		Register(t, buildQwen35)
	}
}

// qwen35Features are the ops beyond the base contract Qwen3.5 needs.
var qwen35Features = []backend.Feature{backend.FeatureGatedDeltaNet, backend.FeatureSigmoidGate}

func buildQwen35(cfg *weights.Config, src Source, m *Model) error {
	for _, f := range qwen35Features {
		if !backend.Supports(m.be, f) {
			return fmt.Errorf("%s needs %s, which the %s backend does not run", cfg.ModelType, f, m.be.Name())
		}
	}
	dnb, ok := m.be.(backend.DeltaNetBackend)
	if !ok {
		return fmt.Errorf("%s: the %s backend declares %s but has no GatedDeltaNet", cfg.ModelType, m.be.Name(), backend.FeatureGatedDeltaNet)
	}
	types, err := qwen35LayerTypes(cfg)
	if err != nil {
		return err
	}
	dp := qwen35DeltaNetParams(cfg)
	if dp.KHeads <= 0 || dp.VHeads <= 0 || dp.VHeads%dp.KHeads != 0 || dp.KDim <= 0 || dp.VDim <= 0 || dp.ConvKernel < 1 {
		return fmt.Errorf("%s: linear attention shape %+v: heads, head dims and conv kernel must be positive, value heads a multiple of key heads", cfg.ModelType, dp)
	}
	mlx := qwen35MLXLayout(src, types)
	norm := func(name string, n int) (backend.Weight, error) {
		if mlx {
			return src.Dense(name, n) // already 1+w
		}
		return onePlusNorm(src, m.be, name, n)
	}
	if err := loadTopNorm(cfg, src, m, norm); err != nil {
		return err
	}
	act, err := activation(cfg.HiddenAct)
	if err != nil {
		return err
	}
	rope, err := ropeFor(cfg.Rope, cfg.HeadDim)
	if err != nil {
		return err
	}
	eps := float32(cfg.RMSNormEps)
	ap := backend.AttnParams{Heads: cfg.Heads, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, Scale: DefaultScale(cfg.HeadDim)}
	for i, typ := range types {
		prefix := fmt.Sprintf("model.layers.%d", i)
		l := &llamaLayer{hidden: cfg.Hidden, eps: eps}
		if l.inNorm, err = norm(prefix+".input_layernorm.weight", cfg.Hidden); err != nil {
			return err
		}
		if l.postNorm, err = norm(prefix+".post_attention_layernorm.weight", cfg.Hidden); err != nil {
			return err
		}
		if typ == "linear_attention" {
			l.attn, err = loadDeltaNet(src, dnb, prefix+".linear_attn", cfg.Hidden, dp, eps, mlx)
		} else {
			l.attn, err = loadQwen35Attention(src, prefix+".self_attn", cfg.Hidden, ap, eps, rope, norm)
		}
		if err != nil {
			return err
		}
		if l.ffn, err = loadQwen35FFN(cfg, src, prefix, act); err != nil {
			return err
		}
		m.Layers = append(m.Layers, l)
	}
	return nil
}

// qwen35LayerTypes returns layer_types, or transformers' default: every
// full_attention_interval-th layer (4 when absent) full, the rest linear.
func qwen35LayerTypes(cfg *weights.Config) ([]string, error) {
	return periodicLayerTypes(cfg, []string{"full_attention_interval"}, 4, "linear_attention")
}

// shaper is a source that tells a stored tensor's shape (the checkpoint).
type shaper interface {
	TensorShape(name string) ([]int, bool)
}

// TensorShape is a checkpoint tensor's stored shape.
func (c *checkpointSource) TensorShape(name string) ([]int, bool) {
	ti, _, ok := c.ck.Info(name)
	return ti.Shape, ok
}

// qwen35MLXLayout reports whether the checkpoint is mlx-lm's: its first
// linear layer's conv is [channels, kernel, 1]. Sources that cannot tell
// (synthetic weights) are taken as transformers' layout.
func qwen35MLXLayout(src Source, types []string) bool {
	sh, ok := src.(shaper)
	if !ok {
		return false
	}
	for i, t := range types {
		if t == "linear_attention" {
			s, ok := sh.TensorShape(fmt.Sprintf("model.layers.%d.linear_attn.conv1d.weight", i))
			return ok && len(s) == 3 && s[2] == 1 && s[1] != 1
		}
	}
	return false
}

// loadQwen35Attention loads a gated full-attention layer, its q/k norms
// through norm.
func loadQwen35Attention(src Source, prefix string, hidden int, p backend.AttnParams, eps float32, rope backend.RoPE,
	norm func(string, int) (backend.Weight, error)) (*Attention, error) {
	a, err := loadAttention(src, prefix, hidden, p, eps, attnLoad{outGate: true})
	if err != nil {
		return nil, err
	}
	a.Rope = rope
	if a.QNorm, err = norm(prefix+".q_norm.weight", p.HeadDim); err != nil {
		return nil, err
	}
	if a.KNorm, err = norm(prefix+".k_norm.weight", p.HeadDim); err != nil {
		return nil, err
	}
	return a, nil
}

// loadQwen35FFN loads a layer's dense MLP, or with num_experts its
// routed experts and shared expert.
func loadQwen35FFN(cfg *weights.Config, src Source, prefix string, act backend.Activation) (FFN, error) {
	if cfg.NumExperts <= 0 {
		return LoadMLP(src, prefix+".mlp", cfg.Hidden, cfg.Intermediate, act)
	}
	p := backend.MoEParams{TopK: cfg.TopK, Renorm: true, Act: act}
	moe, err := LoadMoE(src, prefix, qwenMoENaming, cfg.Hidden, cfg.MoEIntermediate, cfg.NumExperts, p)
	if err != nil {
		return nil, err
	}
	f := &sharedExpertMoE{moe: moe, hidden: cfg.Hidden}
	si, _ := cfg.Raw["shared_expert_intermediate_size"].(float64)
	if si <= 0 {
		return nil, fmt.Errorf("%s: shared_expert_intermediate_size %v must be positive", prefix, si)
	}
	if f.shared, err = LoadMLP(src, prefix+".mlp.shared_expert", cfg.Hidden, int(si), act); err != nil {
		return nil, err
	}
	if f.gate, err = src.Linear(prefix+".mlp.shared_expert_gate", 1, cfg.Hidden); err != nil {
		return nil, err
	}
	return f, nil
}

// sharedExpertMoE is routed experts plus an always-on shared expert whose
// output is scaled per token by sigmoid(x · shared_expert_gate)
// (FeatureSigmoidGate's one-column gate).
type sharedExpertMoE struct {
	moe    *MoE
	shared *MLP
	gate   backend.Weight
	hidden int
}

func (f *sharedExpertMoE) Forward(s *Step, h, out backend.Tensor) {
	b := s.B
	f.moe.Forward(s, h, out)
	y := s.Scratch("shared.y", f.hidden)
	g := s.Scratch("shared.g", 1)
	f.shared.Forward(s, h, y)
	b.Linear(g, h, f.gate, nil)
	b.GatedAct(y, g, y, backend.Sigmoid)
	b.Add(out, out, y)
}
