package synthetic

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/weights"
)

// Gemma 4's tensors as mlx-lm stores them, all sizes: the dense 31B, the
// 26B-A4B's MoE block beside the dense MLP, and the E-series' per-layer
// inputs and KV-shared layers (tested name for name against the tiny
// gemma4, gemma4_moe and gemma4_e fixtures).

func (p *planner) num(k string) int { f, _ := p.cfg.Raw[k].(float64); return int(f) }

// gemma4 adds the model-level per-layer-input tables and returns the
// layer planner.
func (p *planner) gemma4() func(i int, prefix string) error {
	c := p.cfg
	pli := p.num("hidden_size_per_layer_input")
	if pli > 0 {
		p.linear("model.embed_tokens_per_layer", c.Vocab, c.Layers*pli)
		p.linear("model.per_layer_model_projection", c.Layers*pli, c.Hidden)
		p.dense("model.per_layer_projection_norm.weight", pli)
	}
	// The last num_kv_shared_layers layers read an earlier layer's K/V and
	// store no k/v projections (and, double-wide, twice the MLP).
	firstShared := c.Layers - p.num("num_kv_shared_layers")
	doubleWide := c.Raw["use_double_wide_mlp"] == true
	moe := c.Raw["enable_moe_block"] == true
	return func(i int, prefix string) error {
		hd, kvh, full := GemmaLayerGeometry(c, i)
		shared := i >= firstShared
		if shared {
			a := prefix + ".self_attn"
			p.linear(a+".q_proj", c.Heads*hd, c.Hidden)
			p.linear(a+".o_proj", c.Hidden, c.Heads*hd)
			p.dense(a+".q_norm.weight", hd)
		} else {
			p.attention(prefix, c.Heads, kvh, hd, c.AttentionBias, true, !(full && c.AttentionKEqV))
		}
		p.dense(prefix+".pre_feedforward_layernorm.weight", c.Hidden)
		p.dense(prefix+".post_feedforward_layernorm.weight", c.Hidden)
		p.dense(prefix+".layer_scalar", 1)
		inter := c.Intermediate
		if doubleWide && shared {
			inter *= 2
		}
		p.mlp(prefix+".mlp", inter)
		if moe {
			e, mi := gemmaExpertCount(c), p.num("moe_intermediate_size")
			if e <= 0 || mi <= 0 {
				return fmt.Errorf("synthetic weights: Gemma 4 MoE block with num_experts %d, moe_intermediate_size %d", e, mi)
			}
			for _, n := range []string{"pre_feedforward_layernorm_2", "post_feedforward_layernorm_1", "post_feedforward_layernorm_2"} {
				p.dense(prefix+"."+n+".weight", c.Hidden)
			}
			p.linear(prefix+".router.proj", e, c.Hidden)
			p.dense(prefix+".router.per_expert_scale", e)
			p.dense(prefix+".router.scale", c.Hidden)
			ex := prefix + ".experts.switch_glu."
			p.linear(ex+"gate_proj", e, mi, c.Hidden)
			p.linear(ex+"up_proj", e, mi, c.Hidden)
			p.linear(ex+"down_proj", e, c.Hidden, mi)
		}
		if pli > 0 {
			p.linear(prefix+".per_layer_input_gate", pli, c.Hidden)
			p.linear(prefix+".per_layer_projection", c.Hidden, pli)
			p.dense(prefix+".post_per_layer_input_norm.weight", c.Hidden)
		}
		return nil
	}
}

// gemmaExpertCount and gemmaTopK are Gemma 4's MoE block's num_experts
// and top_k_experts (0 without one).
func gemmaExpertCount(c *weights.Config) int {
	if c.Raw["enable_moe_block"] != true {
		return 0
	}
	f, _ := c.Raw["num_experts"].(float64)
	return int(f)
}

func gemmaTopK(c *weights.Config) int {
	if gemmaExpertCount(c) == 0 {
		return 0
	}
	f, _ := c.Raw["top_k_experts"].(float64)
	return int(f)
}
