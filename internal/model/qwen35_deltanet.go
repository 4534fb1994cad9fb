package model

import (
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// deltaNet is a Qwen3.5 linear-attention layer (transformers'
// Qwen3_5GatedDeltaNet): in_proj_qkv, in_proj_z, in_proj_a and in_proj_b
// project the normalised input; the backend's GatedDeltaNet runs the
// causal conv, the gates and the delta rule over the sequence's recurrent
// state; the output is RMSNorm(core) * w * silu(z) per value head, then
// out_proj. Its KV layer asks the store for that state instead of K/V.
type deltaNet struct {
	be                 backend.DeltaNetBackend
	qkv, z, a, b, out  backend.Weight
	norm               backend.Weight // [VDim], applied as stored (not 1+w)
	w                  backend.DeltaNetWeights
	p                  backend.DeltaNetParams
	eps                float32
	hidden, valueWidth int
}

// deltaNetChunk is the delta rule's prefill chunk in transformers
// (torch_chunk_gated_delta_rule's chunk_size).
const deltaNetChunk = 64

func (d *deltaNet) KV() backend.KVLayer { return backend.KVLayer{DeltaNet: d.p} }

func (d *deltaNet) Forward(s *Step, h, out backend.Tensor) {
	b, p := s.B, d.p
	qkv := s.Scratch("dn.qkv", p.Channels())
	z := s.Scratch("dn.z", d.valueWidth)
	ga := s.Scratch("dn.a", p.VHeads)
	gb := s.Scratch("dn.b", p.VHeads)
	core := s.Scratch("dn.core", d.valueWidth)
	b.Linear(qkv, h, d.qkv, nil)
	b.Linear(z, h, d.z, nil)
	b.Linear(ga, h, d.a, nil)
	b.Linear(gb, h, d.b, nil)
	d.be.GatedDeltaNet(core, qkv, ga, gb, d.w, s.KV, s.Layer, p)
	heads := b.View(core, s.N*p.VHeads, p.VDim)
	b.RMSNorm(heads, heads, d.norm, d.eps)
	b.GatedAct(z, z, core, backend.SiLU)
	b.Linear(out, z, d.out, nil)
	s.AllReduce(out) // out_proj is row-parallel under tensor parallelism
}

// qwen35DeltaNetParams reads the linear_* keys.
func qwen35DeltaNetParams(cfg *weights.Config) backend.DeltaNetParams {
	num := func(k string, def int) int {
		if f, ok := cfg.Raw[k].(float64); ok {
			return int(f)
		}
		return def
	}
	return backend.DeltaNetParams{
		KHeads: num("linear_num_key_heads", 0), VHeads: num("linear_num_value_heads", 0),
		KDim: num("linear_key_head_dim", 0), VDim: num("linear_value_head_dim", 0),
		ConvKernel: num("linear_conv_kernel_dim", 4), ChunkSize: deltaNetChunk,
	}
}

// loadDeltaNet reads prefix (model.layers.N.linear_attn).
func loadDeltaNet(src Source, be backend.DeltaNetBackend, prefix string, hidden int, p backend.DeltaNetParams, eps float32, mlxConv bool) (*deltaNet, error) {
	vw := p.VHeads * p.VDim
	d := &deltaNet{be: be, p: p, eps: eps, hidden: hidden, valueWidth: vw}
	var err error
	for _, l := range []struct {
		dst  *backend.Weight
		name string
		rows int
		cols int
	}{{&d.qkv, "in_proj_qkv", p.Channels(), hidden}, {&d.z, "in_proj_z", vw, hidden},
		{&d.a, "in_proj_a", p.VHeads, hidden}, {&d.b, "in_proj_b", p.VHeads, hidden}, {&d.out, "out_proj", hidden, vw}} {
		if *l.dst, err = src.Linear(prefix+"."+l.name, l.rows, l.cols); err != nil {
			return nil, err
		}
	}
	// transformers stores the depthwise conv [channels, 1, kernel], mlx-lm
	// [channels, kernel, 1]: the same values in the same order.
	convShape := []int{p.Channels(), 1, p.ConvKernel}
	if mlxConv {
		convShape = []int{p.Channels(), p.ConvKernel, 1}
	}
	for _, t := range []struct {
		dst   *backend.Weight
		name  string
		shape []int
	}{{&d.w.Conv, "conv1d.weight", convShape}, {&d.w.ALog, "A_log", []int{p.VHeads}},
		{&d.w.DtBias, "dt_bias", []int{p.VHeads}}, {&d.norm, "norm.weight", []int{p.VDim}}} {
		if *t.dst, err = src.Dense(prefix+"."+t.name, t.shape...); err != nil {
			return nil, err
		}
	}
	return d, nil
}
