package model

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// gpt-oss (openai/gpt-oss-20b and -120b), following transformers'
// modeling_gpt_oss.py:
//
//   - Llama-style pre-norm layers (llamaLayer) with q/k/v/o biases;
//   - attention sinks: a learned logit per head that joins each query's
//     softmax and is dropped after it (AttnParams.Sinks);
//   - layer_types alternating sliding_attention (sliding_window tokens,
//     128 in the released models) and full_attention;
//   - yarn RoPE (rope_parameters, through ropeFor), rotate_half layout;
//   - every layer a MoE: a biased router, top-k of its logits softmaxed
//     (= softmax over all experts renormalised over the top k), experts with
//     biased gate/up/down projections and the clamped SwiGLU
//     gate*sigmoid(1.702*gate) * (up+1) with gate <= limit and up in
//     [-limit, limit] (swiglu_limit, 7.0).
//
// Experts come in three layouts (gptoss_experts.go): the HF bf16 one
// (gate_up_proj [E, hidden, 2*inter], gate and up interleaved by column),
// openai's MXFP4 one (*_blocks/*_scales) and mlx-lm's (gate_proj, up_proj,
// down_proj split at conversion, mode mxfp4).
func init() { Register("gpt_oss", buildGptOss) }

// gptOssAlpha is the sigmoid slope of gpt-oss's SwiGLU (a constant in
// transformers, not a config key).
const gptOssAlpha = 1.702

// gptOssFeatures are the ops beyond the base contract gpt-oss needs.
var gptOssFeatures = []backend.Feature{backend.FeatureAttentionSinks, backend.FeatureMoEBiases, backend.FeatureSwiGLUClamped}

func buildGptOss(cfg *weights.Config, src Source, m *Model) error {
	for _, f := range gptOssFeatures {
		if !backend.Supports(m.be, f) {
			return fmt.Errorf("gpt_oss needs %s, which the %s backend does not run", f, m.be.Name())
		}
	}
	if err := loadTop(cfg, src, m); err != nil {
		return err
	}
	rope, err := ropeFor(cfg.Rope, cfg.HeadDim)
	if err != nil {
		return err
	}
	types, err := gptOssLayerTypes(cfg)
	if err != nil {
		return err
	}
	limit := 7.0
	if v, ok := cfg.Raw["swiglu_limit"].(float64); ok {
		limit = v
	}
	mp := backend.MoEParams{TopK: cfg.TopK, Renorm: true, Act: backend.SwiGLUClamped, Alpha: gptOssAlpha, Limit: float32(limit)}
	eps := float32(cfg.RMSNormEps)
	for i := range cfg.Layers {
		prefix := fmt.Sprintf("model.layers.%d", i)
		p := backend.AttnParams{Heads: cfg.Heads, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, Scale: DefaultScale(cfg.HeadDim)}
		if types[i] == "sliding_attention" {
			p.Window = cfg.SlidingWindow
		}
		l := &llamaLayer{hidden: cfg.Hidden, eps: eps}
		if l.inNorm, err = src.Dense(prefix+".input_layernorm.weight", cfg.Hidden); err != nil {
			return err
		}
		if l.postNorm, err = src.Dense(prefix+".post_attention_layernorm.weight", cfg.Hidden); err != nil {
			return err
		}
		a, err := LoadAttention(src, prefix+".self_attn", cfg.Hidden, p, eps)
		if err != nil {
			return err
		}
		a.Rope = rope
		if a.Params.Sinks, err = src.Dense(prefix+".self_attn.sinks", cfg.Heads); err != nil {
			return err
		}
		l.attn = a
		if l.ffn, err = loadGptOssMoE(src, prefix+".mlp", cfg, mp); err != nil {
			return err
		}
		m.Layers = append(m.Layers, l)
	}
	return nil
}

// gptOssLayerTypes returns layer_types, or transformers' default (sliding
// on even layers, full on odd); sliding layers need a window.
func gptOssLayerTypes(cfg *weights.Config) ([]string, error) {
	types := cfg.LayerTypes
	if types == nil {
		for i := range cfg.Layers {
			t := "full_attention"
			if i%2 == 0 {
				t = "sliding_attention"
			}
			types = append(types, t)
		}
	}
	if len(types) != cfg.Layers {
		return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(types), cfg.Layers)
	}
	for i, t := range types {
		switch t {
		case "full_attention":
		case "sliding_attention":
			if cfg.SlidingWindow <= 0 {
				return nil, fmt.Errorf("layer_types[%d] is sliding_attention but sliding_window is %d", i, cfg.SlidingWindow)
			}
		default:
			return nil, fmt.Errorf("layer_types[%d]: unsupported layer type %q", i, t)
		}
	}
	return types, nil
}
