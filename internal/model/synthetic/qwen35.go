package synthetic

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/model"
)

// Qwen3.5's tensors as mlx-lm stores them, dense and MoE (tested name for
// name against the tiny qwen3_5_text and qwen3_5_moe_text fixtures):
// Gated DeltaNet linear-attention layers (the conv1d as [channels, kernel,
// 1]), gated full attention whose q_proj holds each head's query and gate
// rows, and a dense MLP or routed experts with a sigmoid-gated shared
// expert. Which layers are linear comes from the model's own KV geometry.

func (p *planner) qwen35() (func(i int, prefix string) error, error) {
	c := p.cfg
	kv, err := model.KVLayersFor(c)
	if err != nil {
		return nil, err
	}
	shared := p.num("shared_expert_intermediate_size")
	if c.NumExperts > 0 && shared <= 0 {
		return nil, fmt.Errorf("synthetic weights: %s with %d experts and shared_expert_intermediate_size %d", c.ModelType, c.NumExperts, shared)
	}
	return func(i int, prefix string) error {
		if d := kv[i].DeltaNet; kv[i].Recurrent() {
			a := prefix + ".linear_attn"
			vw := d.VHeads * d.VDim
			p.linear(a+".in_proj_qkv", d.Channels(), c.Hidden)
			p.linear(a+".in_proj_z", vw, c.Hidden)
			p.linear(a+".in_proj_a", d.VHeads, c.Hidden)
			p.linear(a+".in_proj_b", d.VHeads, c.Hidden)
			p.linear(a+".out_proj", c.Hidden, vw)
			p.dense(a+".conv1d.weight", d.Channels(), d.ConvKernel, 1)
			p.dense(a+".A_log", d.VHeads)
			p.dense(a+".dt_bias", d.VHeads)
			p.dense(a+".norm.weight", d.VDim)
		} else {
			p.gatedAttention(prefix)
		}
		if c.NumExperts <= 0 {
			p.mlp(prefix+".mlp", c.Intermediate)
			return nil
		}
		p.experts(prefix+".mlp", "gate", c.MoEIntermediate)
		p.mlp(prefix+".mlp.shared_expert", shared)
		p.linear(prefix+".mlp.shared_expert_gate", 1, c.Hidden)
		return nil
	}, nil
}

// gatedAttention is Qwen3.5's full attention: q_proj twice as wide (query
// and output gate per head), q/k norms per head.
func (p *planner) gatedAttention(prefix string) {
	c := p.cfg
	qd, kd := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	a := prefix + ".self_attn"
	p.linear(a+".q_proj", 2*qd, c.Hidden)
	p.linear(a+".k_proj", kd, c.Hidden)
	p.linear(a+".v_proj", kd, c.Hidden)
	p.linear(a+".o_proj", c.Hidden, qd)
	if c.AttentionBias {
		p.dense(a+".q_proj.bias", 2*qd)
		p.dense(a+".k_proj.bias", kd)
		p.dense(a+".v_proj.bias", kd)
	}
	p.dense(a+".q_norm.weight", c.HeadDim)
	p.dense(a+".k_norm.weight", c.HeadDim)
}
