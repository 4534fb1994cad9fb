package model

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// Attention is the self-attention block shared by every family: q/k/v
// projections (optional biases), optional per-head q/k RMSNorm and a
// weightless v norm, RoPE, paged attention, output projection.
type Attention struct {
	Q, K, V, O   backend.Weight
	QBias, KBias backend.Weight
	VBias        backend.Weight
	OBias        backend.Weight // gpt-oss, Llama with attention_bias
	QNorm, KNorm backend.Weight
	VNorm        bool // RMSNorm without weight on values (Gemma 4)
	KEqV         bool // values are the key projection (before k norm)
	Params       backend.AttnParams
	Rope         backend.RoPE
	NoRope       bool
	NormEps      float32
	// KVShared: no K/V of its own; q attends over layer KVFrom's, stored
	// earlier in the step (Gemma 4, backend.FeatureSharedKV).
	KVShared bool
	KVFrom   int
}

// LoadAttention reads prefix.{q,k,v,o}_proj (+ biases and q/k norms when
// present) for the given geometry.
func LoadAttention(src Source, prefix string, hidden int, p backend.AttnParams, eps float32) (*Attention, error) {
	return LoadAttentionKEqV(src, prefix, hidden, p, eps, false)
}

// LoadAttentionKEqV is LoadAttention for layers that may take their values
// from the key projection (Gemma 4 attention_k_eq_v): with kEqV set, a
// missing v_proj is expected rather than an error.
func LoadAttentionKEqV(src Source, prefix string, hidden int, p backend.AttnParams, eps float32, kEqV bool) (*Attention, error) {
	return loadAttention(src, prefix, hidden, p, eps, kEqV, true)
}

// loadAttention loads the projections and biases, and the q/k norms when
// headNorms is set (callers whose norms need a transform load their own).
func loadAttention(src Source, prefix string, hidden int, p backend.AttnParams, eps float32, kEqV, headNorms bool) (*Attention, error) {
	a := &Attention{Params: p, NormEps: eps, KEqV: kEqV}
	qd, kd := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	var err error
	load := func(dst *backend.Weight, name string, out, in int) {
		if err == nil {
			*dst, err = src.Linear(prefix+name, out, in)
		}
	}
	load(&a.Q, ".q_proj", qd, hidden)
	load(&a.K, ".k_proj", kd, hidden)
	if src.Has(prefix+".v_proj.weight") || !a.KEqV {
		load(&a.V, ".v_proj", kd, hidden)
	}
	load(&a.O, ".o_proj", hidden, qd)
	opt := func(dst *backend.Weight, name string, n int) {
		if err == nil && src.Has(prefix+name) {
			*dst, err = src.Dense(prefix+name, n)
		}
	}
	opt(&a.QBias, ".q_proj.bias", qd)
	opt(&a.KBias, ".k_proj.bias", kd)
	opt(&a.VBias, ".v_proj.bias", kd)
	opt(&a.OBias, ".o_proj.bias", hidden)
	if headNorms {
		opt(&a.QNorm, ".q_norm.weight", p.HeadDim)
		opt(&a.KNorm, ".k_norm.weight", p.HeadDim)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// DefaultScale is 1/sqrt(head_dim).
func DefaultScale(headDim int) float32 { return float32(1 / math.Sqrt(float64(headDim))) }

// Forward writes the block's output (before the residual add) to out.
func (a *Attention) Forward(s *Step, h, out backend.Tensor) {
	b, p := s.B, a.Params
	qd, kd := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	q := s.Scratch("q", qd)
	if a.KVShared {
		a.sharedForward(s, h, q, out)
		return
	}
	k := s.Scratch("k", kd)
	v := s.Scratch("v", kd)
	b.Linear(q, h, a.Q, a.QBias)
	// k_eq_v: values are the raw key projection. With a k norm, the
	// normalised keys are written from that one projection (RMSNorm reads
	// v, writes k); without one the keys are projected a second time.
	kSrc := k
	switch {
	case a.V != nil:
		b.Linear(k, h, a.K, a.KBias)
		b.Linear(v, h, a.V, a.VBias)
	case a.KNorm != nil:
		b.Linear(v, h, a.K, a.KBias)
		kSrc = v
	default:
		b.Linear(k, h, a.K, a.KBias)
		b.Linear(v, h, a.K, a.KBias)
	}
	if a.QNorm != nil {
		qv := b.View(q, s.N*p.Heads, p.HeadDim)
		b.RMSNorm(qv, qv, a.QNorm, a.NormEps)
	}
	if a.KNorm != nil {
		kv := b.View(k, s.N*p.KVHeads, p.HeadDim)
		b.RMSNorm(kv, b.View(kSrc, s.N*p.KVHeads, p.HeadDim), a.KNorm, a.NormEps)
	}
	if a.VNorm {
		vv := b.View(v, s.N*p.KVHeads, p.HeadDim)
		b.RMSNorm(vv, vv, nil, a.NormEps)
	}
	if !a.NoRope {
		b.ApplyRoPE(q, p.Heads, p.HeadDim, a.Rope)
		b.ApplyRoPE(k, p.KVHeads, p.HeadDim, a.Rope)
	}
	att := s.Scratch("att", qd)
	p.ScratchQK = true // q and k are this call's scratch
	b.Attention(att, q, k, v, s.KV, s.Layer, p)
	b.Linear(out, att, a.O, a.OBias)
}

// sharedForward is Forward for a KV-shared layer: only the query is
// projected, normalised and rotated.
func (a *Attention) sharedForward(s *Step, h, q, out backend.Tensor) {
	b, p := s.B, a.Params
	b.Linear(q, h, a.Q, a.QBias)
	if a.QNorm != nil {
		qv := b.View(q, s.N*p.Heads, p.HeadDim)
		b.RMSNorm(qv, qv, a.QNorm, a.NormEps)
	}
	if !a.NoRope {
		b.ApplyRoPE(q, p.Heads, p.HeadDim, a.Rope)
	}
	att := s.Scratch("att", p.Heads*p.HeadDim)
	p.ScratchQK = true
	b.Attention(att, q, nil, nil, s.KV, a.KVFrom, p)
	b.Linear(out, att, a.O, a.OBias)
}

// MLP is a gated feed-forward block: down(act(gate(x)) * up(x)), each
// projection with an optional bias (Llama's mlp_bias).
type MLP struct {
	Gate, Up, Down             backend.Weight
	GateBias, UpBias, DownBias backend.Weight
	Act                        backend.Activation
	Inter                      int
}

// LoadMLP reads prefix.{gate,up,down}_proj and their biases when present.
func LoadMLP(src Source, prefix string, hidden, inter int, act backend.Activation) (*MLP, error) {
	m := &MLP{Act: act, Inter: inter}
	for _, p := range []struct {
		w, b    *backend.Weight
		name    string
		out, in int
	}{{&m.Gate, &m.GateBias, ".gate_proj", inter, hidden}, {&m.Up, &m.UpBias, ".up_proj", inter, hidden},
		{&m.Down, &m.DownBias, ".down_proj", hidden, inter}} {
		var err error
		if *p.w, err = src.Linear(prefix+p.name, p.out, p.in); err != nil {
			return nil, err
		}
		if src.Has(prefix + p.name + ".bias") {
			if *p.b, err = src.Dense(prefix+p.name+".bias", p.out); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Forward writes the block's output to out.
func (m *MLP) Forward(s *Step, h, out backend.Tensor) {
	g := s.Scratch("gate", m.Inter)
	u := s.Scratch("up", m.Inter)
	s.B.Linear(g, h, m.Gate, m.GateBias)
	s.B.Linear(u, h, m.Up, m.UpBias)
	s.B.GatedAct(g, g, u, m.Act)
	s.B.Linear(out, g, m.Down, m.DownBias)
}

// MoE is a routed mixture of gated-MLP experts.
type MoE struct {
	Router  backend.Weight
	Experts backend.Experts
	Params  backend.MoEParams
}

// Forward writes the block's output to out.
func (m *MoE) Forward(s *Step, h, out backend.Tensor) {
	s.B.MoE(out, h, m.Router, m.Experts, m.Params)
}

// FFN is either an MLP or a MoE.
type FFN interface {
	Forward(s *Step, h, out backend.Tensor)
}

func activation(name string) (backend.Activation, error) {
	switch name {
	case "", "silu", "swish":
		return backend.SiLU, nil
	case "gelu_pytorch_tanh", "gelu_tanh", "gelu_new", "gelu_fast":
		return backend.GELUTanh, nil
	case "gelu":
		// transformers' "gelu" is the exact erf form.
		return backend.GELU, nil
	}
	return 0, fmt.Errorf("unsupported activation %q", name)
}
