package model

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/weights"
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
	// OutGate [Heads*HeadDim, hidden], when set, gates the attention output
	// by sigmoid(h @ OutGate^T) before o_proj (Qwen3.5's gated attention,
	// whose q_proj holds each head's query and gate rows; split at load).
	OutGate backend.Weight
}

// KV is the layer geometry the KV store keeps for this attention.
func (a *Attention) KV() backend.KVLayer {
	p := a.Params
	// The window tells the backend it may keep this layer's KV in a
	// bounded per-sequence ring instead of the paged blocks.
	return backend.KVLayer{KVHeads: p.KVHeads, HeadDim: p.HeadDim, Window: p.Window, Shared: a.KVShared}
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
	return loadAttention(src, prefix, hidden, p, eps, attnLoad{kEqV: kEqV, headNorms: true})
}

// attnLoad are loadAttention's variants.
type attnLoad struct {
	kEqV      bool // v_proj may be missing: values from k_proj
	headNorms bool // load q/k norms as stored (else the caller loads its own)
	outGate   bool // q_proj is [query | gate] per head: split into Q and OutGate
}

// loadAttention loads the projections and biases, and the q/k norms when
// o.headNorms is set (callers whose norms need a transform load their own).
func loadAttention(src Source, prefix string, hidden int, p backend.AttnParams, eps float32, o attnLoad) (*Attention, error) {
	a := &Attention{Params: p, NormEps: eps, KEqV: o.kEqV}
	qd, kd := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	var err error
	load := func(dst *backend.Weight, name string, out, in int) {
		if err == nil {
			*dst, err = src.Linear(prefix+name, out, in)
		}
	}
	if o.outGate {
		a.Q, a.OutGate, err = loadQueryGate(src, prefix+".q_proj", p.Heads, p.HeadDim, hidden)
	} else {
		load(&a.Q, ".q_proj", qd, hidden)
	}
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
	if o.headNorms {
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
	if a.OutGate != nil {
		g := s.Scratch("att.gate", qd)
		b.Linear(g, h, a.OutGate, nil)
		b.GatedAct(g, g, att, backend.Sigmoid)
		att = g
	}
	b.Linear(out, att, a.O, a.OBias)
	s.AllReduce(out) // o_proj is row-parallel under tensor parallelism
}

// loadQueryGate splits a q_proj of [heads, 2*headDim, hidden] rows, each
// head's query rows then its gate rows, into the query and gate matrices
// [heads*headDim, hidden] (dense or quantized: whole rows move).
func loadQueryGate(src Source, module string, heads, headDim, hidden int) (q, gate backend.Weight, err error) {
	hs, ok := src.(hostLinearSource)
	if !ok {
		return nil, nil, fmt.Errorf("%s: a gated q_proj needs a source that can split tensors on the host", module)
	}
	h, err := hs.HostLinear(module, 2*heads*headDim, hidden)
	if err != nil {
		return nil, nil, err
	}
	h.Shape = []int{heads, 2 * headDim, hidden}
	var out [2]backend.Weight
	for half := range out {
		part, err := weights.SplitHalves(h, half)
		if err != nil {
			return nil, nil, err
		}
		part.Shape = []int{heads * headDim, hidden}
		if out[half], err = uploadRearranged(hs, part); err != nil {
			return nil, nil, err
		}
	}
	return out[0], out[1], nil
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
	s.AllReduce(out) // o_proj is row-parallel under tensor parallelism
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
	s.AllReduce(out) // down_proj is row-parallel under tensor parallelism
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
	s.AllReduce(out) // expert parallel: each rank added its own experts' outputs
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
