package synthetic

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Tensor is one stored tensor of the checkpoint a config describes, as
// mlx_lm.convert would write it: a quantized linear is three tensors
// (.weight U32 packed, .scales and .biases BF16), anything else one BF16
// tensor. Names are canonical (HF text-model names, see weights.Canonical).
type Tensor struct {
	Name  string
	Shape []int // stored shape (packed words for quantized .weight)
	DType tensor.DType
}

// Bytes is the stored size.
func (t Tensor) Bytes() int64 {
	n := int64(t.DType.Size())
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// Plan lists the tensors a real checkpoint of cfg's architecture holds.
// It is what Has answers from and what the memory estimate adds up, so it
// is tested name for name against the tiny mlx_lm fixtures in
// shared/testdata.
func Plan(cfg *weights.Config) ([]Tensor, error) {
	p := &planner{cfg: cfg}
	if err := p.run(); err != nil {
		return nil, err
	}
	return p.out, nil
}

// TotalBytes adds up a plan.
func TotalBytes(plan []Tensor) int64 {
	var n int64
	for _, t := range plan {
		n += t.Bytes()
	}
	return n
}

// DecodeBytes is what one decode token reads of plan's weights at batch
// 1: every tensor once, except the embedding table, of which it reads one
// row (the whole table when it is also the tied output head), and the
// stacked experts (switch_mlp, gpt-oss's mlp.experts), of which it reads the top-k.
func DecodeBytes(plan []Tensor, cfg *weights.Config) int64 {
	var n int64
	for _, t := range plan {
		b := t.Bytes()
		switch {
		case strings.HasPrefix(t.Name, "model.embed_tokens.") && !cfg.TieEmbeddings:
			b /= int64(max(cfg.Vocab, 1))
		case (strings.Contains(t.Name, ".switch_mlp.") || strings.Contains(t.Name, ".mlp.experts.")) && cfg.NumExperts > 0:
			b = b * int64(min(cfg.TopK, cfg.NumExperts)) / int64(cfg.NumExperts)
		case strings.Contains(t.Name, ".experts.switch_glu.") && gemmaTopK(cfg) > 0:
			e, k := gemmaExpertCount(cfg), gemmaTopK(cfg)
			b = b * int64(min(k, e)) / int64(e)
		case strings.HasPrefix(t.Name, "model.embed_tokens_per_layer."):
			b /= int64(max(cfg.Vocab, 1)) // one row a token, like the untied embedding
		}
		n += b
	}
	return n
}

// ModelType is the architecture a config builds: the text model's type
// for multimodal wrappers (Gemma 4's "gemma4" wraps "gemma4_text").
func ModelType(cfg *weights.Config) string {
	if t, ok := cfg.Raw["text_model_type"].(string); ok && t != "" {
		return t
	}
	return cfg.ModelType
}

// quantFor decides how module is stored. mlx_lm.convert quantizes every
// Linear/Embedding/SwitchLinear whose input dim is a multiple of the group
// size, with the config's per-module override (e.g. Qwen3-MoE routers at 8
// bits); the rest stay in the float dtype.
func quantFor(cfg *weights.Config, module string, in int) (weights.QuantSpec, bool) {
	spec, ok := cfg.Quant.For(module)
	if !ok || spec.GroupSize <= 0 || in%spec.GroupSize != 0 || !quant.ValidBits(spec.Bits) {
		return weights.QuantSpec{}, false
	}
	return spec, true
}

type planner struct {
	cfg *weights.Config
	out []Tensor
}

// linear adds a (possibly quantized) weight of logical shape [.., out, in].
func (p *planner) linear(module string, shape ...int) {
	in := shape[len(shape)-1]
	lead := shape[:len(shape)-1]
	spec, q := quantFor(p.cfg, module, in)
	if !q {
		p.dense(module+".weight", shape...)
		return
	}
	w := append(slices.Clone(lead), in*spec.Bits/32)
	g := append(slices.Clone(lead), in/spec.GroupSize)
	if quant.IsFP(spec.Mode) {
		// MLX's floating-point modes: uint8 scales, no biases.
		p.out = append(p.out, Tensor{module + ".weight", w, tensor.U32}, Tensor{module + ".scales", g, tensor.U8})
		return
	}
	p.out = append(p.out,
		Tensor{module + ".weight", w, tensor.U32},
		Tensor{module + ".scales", g, tensor.BF16},
		Tensor{module + ".biases", slices.Clone(g), tensor.BF16})
}

func (p *planner) dense(name string, shape ...int) {
	p.out = append(p.out, Tensor{name, slices.Clone(shape), tensor.BF16})
}

func (p *planner) run() error {
	c := p.cfg
	if err := c.Validate(); err != nil {
		return err
	}
	mt := ModelType(c)
	p.linear("model.embed_tokens", c.Vocab, c.Hidden)
	p.dense("model.norm.weight", c.Hidden)
	if !c.TieEmbeddings {
		p.linear("lm_head", c.Vocab, c.Hidden)
	}
	var layer func(i int, prefix string) error
	switch mt {
	case "llama", "mistral", "qwen2", "qwen3":
		layer = func(i int, prefix string) error {
			p.attention(prefix, c.Heads, c.KVHeads, c.HeadDim, mt == "qwen2" || c.AttentionBias, mt == "qwen3", true)
			p.mlp(prefix+".mlp", c.Intermediate)
			return nil
		}
	case "qwen3_moe":
		layer = func(i int, prefix string) error {
			p.attention(prefix, c.Heads, c.KVHeads, c.HeadDim, c.AttentionBias, true, true)
			step := max(c.DecoderSparseStep, 1)
			if slices.Contains(c.MLPOnlyLayers, i) || c.NumExperts <= 0 || (i+1)%step != 0 {
				p.mlp(prefix+".mlp", c.Intermediate)
				return nil
			}
			p.experts(prefix+".mlp", "gate", c.MoEIntermediate)
			return nil
		}
	case "mixtral":
		layer = func(i int, prefix string) error {
			p.attention(prefix, c.Heads, c.KVHeads, c.HeadDim, c.AttentionBias, false, true)
			p.experts(prefix+".block_sparse_moe", "gate", c.Intermediate)
			return nil
		}
	case "gemma4_text", "gemma4":
		layer = p.gemma4()
	case "gemma3_text", "gemma3":
		layer = func(i int, prefix string) error {
			p.attention(prefix, c.Heads, c.KVHeads, c.HeadDim, c.AttentionBias, true, true)
			p.dense(prefix+".pre_feedforward_layernorm.weight", c.Hidden)
			p.dense(prefix+".post_feedforward_layernorm.weight", c.Hidden)
			p.mlp(prefix+".mlp", c.Intermediate)
			return nil
		}
	case "gpt_oss":
		layer = func(i int, prefix string) error { p.gptOss(prefix); return nil }
	case "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text":
		var err error
		if layer, err = p.qwen35(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("synthetic weights: no tensor plan for model_type %q", mt)
	}
	for i := range c.Layers {
		prefix := fmt.Sprintf("model.layers.%d", i)
		p.dense(prefix+".input_layernorm.weight", c.Hidden)
		p.dense(prefix+".post_attention_layernorm.weight", c.Hidden)
		if err := layer(i, prefix); err != nil {
			return err
		}
	}
	return nil
}

// attention adds q/k/v/o projections with optional biases and q/k norms.
// withV is false for Gemma 4's k_eq_v full-attention layers, which reuse
// the key projection as values and store no v_proj.
func (p *planner) attention(prefix string, heads, kvHeads, headDim int, bias, qkNorm, withV bool) {
	qd, kd := heads*headDim, kvHeads*headDim
	a := prefix + ".self_attn"
	p.linear(a+".q_proj", qd, p.cfg.Hidden)
	p.linear(a+".k_proj", kd, p.cfg.Hidden)
	if withV {
		p.linear(a+".v_proj", kd, p.cfg.Hidden)
	}
	p.linear(a+".o_proj", p.cfg.Hidden, qd)
	if bias {
		p.dense(a+".q_proj.bias", qd)
		p.dense(a+".k_proj.bias", kd)
		if withV {
			p.dense(a+".v_proj.bias", kd)
		}
	}
	if qkNorm {
		p.dense(a+".q_norm.weight", headDim)
		p.dense(a+".k_norm.weight", headDim)
	}
}

func (p *planner) mlp(prefix string, inter int) {
	h := p.cfg.Hidden
	p.linear(prefix+".gate_proj", inter, h)
	p.linear(prefix+".up_proj", inter, h)
	p.linear(prefix+".down_proj", h, inter)
}

// gptOss adds a gpt-oss layer as mlx-lm stores it: biased attention with
// sinks, a biased router, and biased experts split into gate/up/down.
func (p *planner) gptOss(prefix string) {
	c := p.cfg
	p.attention(prefix, c.Heads, c.KVHeads, c.HeadDim, true, false, true)
	p.dense(prefix+".self_attn.o_proj.bias", c.Hidden)
	p.dense(prefix+".self_attn.sinks", c.Heads)
	m := prefix + ".mlp"
	p.linear(m+".router", c.NumExperts, c.Hidden)
	p.dense(m+".router.bias", c.NumExperts)
	for _, e := range []struct {
		name    string
		out, in int
	}{{"gate_proj", c.Intermediate, c.Hidden}, {"up_proj", c.Intermediate, c.Hidden}, {"down_proj", c.Hidden, c.Intermediate}} {
		p.linear(m+".experts."+e.name, c.NumExperts, e.out, e.in)
		p.dense(m+".experts."+e.name+".bias", c.NumExperts, e.out)
	}
}

// experts adds a router and the stacked expert weights in mlx_lm's
// switch_mlp layout ([experts, out, in]).
func (p *planner) experts(prefix, router string, inter int) {
	h, e := p.cfg.Hidden, p.cfg.NumExperts
	p.linear(prefix+"."+router, e, h)
	p.linear(prefix+".switch_mlp.gate_proj", e, inter, h)
	p.linear(prefix+".switch_mlp.up_proj", e, inter, h)
	p.linear(prefix+".switch_mlp.down_proj", e, h, inter)
}

// GemmaLayerGeometry returns layer i's head dim and KV head count and
// whether it is a full-attention layer: per_layer_config overrides first,
// then the global_* values for full layers, then the defaults.
func GemmaLayerGeometry(c *weights.Config, i int) (headDim, kvHeads int, full bool) {
	headDim, kvHeads = c.HeadDim, c.KVHeads
	full = i < len(c.LayerTypes) && c.LayerTypes[i] == "full_attention"
	if full {
		if c.GlobalHeadDim > 0 {
			headDim = c.GlobalHeadDim
		}
		if c.GlobalKVHeads > 0 {
			kvHeads = c.GlobalKVHeads
		}
	}
	if o, ok := c.PerLayer[i]; ok {
		if o.HeadDim > 0 {
			headDim = o.HeadDim
		}
		if o.KVHeads > 0 {
			kvHeads = o.KVHeads
		}
	}
	return headDim, kvHeads, full
}
