package model

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// The decoder layer Gemma 3 and Gemma 4 share (transformers'
// Gemma3DecoderLayer / Gemma4TextDecoderLayer): sandwich norms around
// attention and the GELU MLP, local (sliding) and global layers with their
// own RoPE, q/k norms per head. What differs between the generations is a
// gemmaSpec: norm weights (Gemma 3 scales by 1+w), attention scale, the v
// norm, Gemma 4's geometry of full layers and k_eq_v.

type gemmaLayer struct {
	inNorm, postAttnNorm, preFFNorm, postFFNorm backend.Weight
	attn                                        *Attention
	mlp                                         *MLP
	moe                                         *gemmaMoE      // beside the MLP (Gemma 4 26B-A4B), or nil
	ple                                         *perLayerInput // Gemma 4 E-series, or nil
	scalar                                      float32
	hidden                                      int
	eps                                         float32
}

func (l *gemmaLayer) KV() backend.KVLayer { return l.attn.KV() }

func (l *gemmaLayer) Forward(s *Step, x backend.Tensor) {
	b := s.B
	h := s.Scratch("h", l.hidden)
	o := s.Scratch("o", l.hidden)
	b.RMSNorm(h, x, l.inNorm, l.eps)
	l.attn.Forward(s, h, o)
	b.RMSNorm(o, o, l.postAttnNorm, l.eps)
	b.Add(x, x, o)
	b.RMSNorm(h, x, l.preFFNorm, l.eps)
	l.mlp.Forward(s, h, o)
	if l.moe != nil {
		l.moe.forward(s, x, o, l.hidden, l.eps)
	}
	b.RMSNorm(o, o, l.postFFNorm, l.eps)
	b.Add(x, x, o)
	if l.ple != nil {
		l.ple.forward(s, x, o, l.eps)
	}
	if l.scalar != 1 {
		b.Scale(x, l.scalar)
	}
}

// gemmaSpec is what one Gemma generation decides for its layers.
type gemmaSpec struct {
	types    []string                                    // sliding_attention / full_attention per layer
	geometry func(i int, sliding bool) (headDim, kv int) // head dim and KV heads of layer i
	rope     func(typ string) weights.RopeConfig
	scale    func(headDim int) float32 // multiplies q·k
	vNorm    bool                      // weightless RMSNorm on values (Gemma 4)
	kEqV     bool                      // full layers may take values from k_proj (Gemma 4)
	// norm loads an RMSNorm weight of n (Gemma 3: stored w, applied 1+w).
	norm func(name string, n int) (backend.Weight, error)
	// moe loads layer prefix's MoE block beside the MLP (nil: none).
	moe func(prefix string) (*gemmaMoE, error)
	// kvFrom is the layer whose K/V layer i reads, or -1 for its own
	// (nil: every layer has its own; Gemma 4's num_kv_shared_layers).
	kvFrom func(i int) int
	// inter is layer i's MLP width (nil: intermediate_size).
	inter func(i int) int
	// ple loads layer i's per-layer input block (nil: none).
	ple func(i int, prefix string) (*perLayerInput, error)
}

// buildGemmaLayers loads every decoder layer of spec.
func buildGemmaLayers(cfg *weights.Config, src Source, m *Model, spec gemmaSpec) error {
	act, err := activation(cfg.HiddenAct)
	if err != nil {
		return err
	}
	for i, typ := range spec.types {
		l, err := loadGemmaLayer(cfg, src, spec, i, typ, act)
		if err != nil {
			return err
		}
		if a := l.attn; a.KVShared {
			// The K/V read must have the layout this layer's query expects.
			own, src := l.KV(), m.Layers[a.KVFrom].KV()
			if own.KVHeads != src.KVHeads || own.HeadDim != src.HeadDim || own.Window != src.Window {
				return fmt.Errorf("layer %d: shares layer %d's KV of %+v, but its own geometry is %+v", i, a.KVFrom, src, own)
			}
		}
		m.Layers = append(m.Layers, l)
	}
	return nil
}

func loadGemmaLayer(cfg *weights.Config, src Source, spec gemmaSpec, i int, typ string, act backend.Activation) (*gemmaLayer, error) {
	prefix := fmt.Sprintf("model.layers.%d", i)
	sliding := typ == "sliding_attention"
	headDim, kvHeads := spec.geometry(i, sliding)
	if kvHeads <= 0 || cfg.Heads%kvHeads != 0 {
		return nil, fmt.Errorf("layer %d: %d KV heads do not divide %d heads", i, kvHeads, cfg.Heads)
	}
	p := backend.AttnParams{Heads: cfg.Heads, KVHeads: kvHeads, HeadDim: headDim, Scale: spec.scale(headDim),
		Softcap: float32(cfg.AttnLogitSoftcap)}
	if sliding {
		p.Window = cfg.SlidingWindow
	}
	rope, err := ropeFor(spec.rope(typ), headDim)
	if err != nil {
		return nil, fmt.Errorf("layer %d (%s): %v", i, typ, err)
	}
	eps := float32(cfg.RMSNormEps)
	l := &gemmaLayer{hidden: cfg.Hidden, eps: eps, scalar: 1}
	for _, n := range []struct {
		dst  *backend.Weight
		name string
	}{{&l.inNorm, "input_layernorm"}, {&l.postAttnNorm, "post_attention_layernorm"},
		{&l.preFFNorm, "pre_feedforward_layernorm"}, {&l.postFFNorm, "post_feedforward_layernorm"}} {
		if *n.dst, err = spec.norm(prefix+"."+n.name+".weight", cfg.Hidden); err != nil {
			return nil, err
		}
	}
	from := -1
	if spec.kvFrom != nil {
		from = spec.kvFrom(i)
	}
	if from >= 0 {
		l.attn, err = loadGemmaSharedAttention(src, spec, prefix, cfg.Hidden, p, eps, from)
	} else {
		l.attn, err = loadGemmaAttention(src, spec, prefix, cfg.Hidden, p, eps, spec.kEqV && !sliding)
	}
	if err != nil {
		return nil, err
	}
	l.attn.Rope = rope
	inter := cfg.Intermediate
	if spec.inter != nil {
		inter = spec.inter(i)
	}
	if l.mlp, err = LoadMLP(src, prefix+".mlp", cfg.Hidden, inter, act); err != nil {
		return nil, err
	}
	if spec.ple != nil {
		if l.ple, err = spec.ple(i, prefix); err != nil {
			return nil, err
		}
	}
	if spec.moe != nil {
		if l.moe, err = spec.moe(prefix); err != nil {
			return nil, err
		}
	}
	if src.Has(prefix + ".layer_scalar") {
		// The value is applied with Scale, so it is read on the host;
		// the tensor is still fetched through Dense like every other
		// one, so sources that account for what a model takes
		// (synthetic, progress reporting) see all of the checkpoint.
		if _, err = src.Dense(prefix+".layer_scalar", 1); err != nil {
			return nil, err
		}
		if l.scalar, err = hostScalar(src, prefix+".layer_scalar"); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// loadGemmaAttention loads the projections, then the q/k norms through
// spec.norm (which Gemma 3 offsets by one).
func loadGemmaAttention(src Source, spec gemmaSpec, prefix string, hidden int, p backend.AttnParams, eps float32, kEqV bool) (*Attention, error) {
	a, err := loadAttention(src, prefix+".self_attn", hidden, p, eps, attnLoad{kEqV: kEqV})
	if err != nil {
		return nil, err
	}
	if a.QNorm, err = spec.norm(prefix+".self_attn.q_norm.weight", p.HeadDim); err != nil {
		return nil, err
	}
	if a.KNorm, err = spec.norm(prefix+".self_attn.k_norm.weight", p.HeadDim); err != nil {
		return nil, err
	}
	a.VNorm = spec.vNorm
	return a, nil
}

// loadGemmaSharedAttention loads a KV-shared layer: q and o projections
// and the q norm; keys and values come from layer from.
func loadGemmaSharedAttention(src Source, spec gemmaSpec, prefix string, hidden int, p backend.AttnParams, eps float32, from int) (*Attention, error) {
	a := &Attention{Params: p, NormEps: eps, KVShared: true, KVFrom: from}
	qd := p.Heads * p.HeadDim
	var err error
	if a.Q, err = src.Linear(prefix+".self_attn.q_proj", qd, hidden); err != nil {
		return nil, err
	}
	if a.O, err = src.Linear(prefix+".self_attn.o_proj", hidden, qd); err != nil {
		return nil, err
	}
	if a.QNorm, err = spec.norm(prefix+".self_attn.q_norm.weight", p.HeadDim); err != nil {
		return nil, err
	}
	return a, nil
}

// hostReader is implemented by sources that can hand a tensor's values to
// the model itself: layer_scalar is a per-layer constant the model applies
// with Scale, and Gemma 3's norm weights are offset by one before upload.
// The checkpoint and synthetic sources both implement it.
type hostReader interface {
	HostDense(name string, shape ...int) (*tensor.Host, error)
}

// HostLinear returns a (possibly quantized) matrix without uploading it.
func (c *checkpointSource) HostLinear(module string, shape ...int) (*tensor.Host, error) {
	return c.ck.Linear(module, shape...)
}

// HostDense returns a float tensor of the given shape without uploading it.
func (c *checkpointSource) HostDense(name string, shape ...int) (*tensor.Host, error) {
	return c.ck.Dense(name, shape...)
}

// hostFloats reads a float tensor's values on the host, and its stored
// size in bytes.
func hostFloats(src Source, name string, n int) ([]float32, int64, error) {
	hr, ok := src.(hostReader)
	if !ok {
		return nil, 0, fmt.Errorf("%s: this weight source cannot read values on the host", name)
	}
	h, err := hr.HostDense(name, n)
	if err != nil {
		return nil, 0, err
	}
	v := make([]float32, n)
	if err := tensor.ToFloat32(v, h.Data, h.DType); err != nil {
		return nil, 0, fmt.Errorf("%s: %v", name, err)
	}
	return v, int64(len(h.Data)), nil
}

// hostScalar reads a one-element float tensor.
func hostScalar(src Source, name string) (float32, error) {
	v, _, err := hostFloats(src, name, 1)
	if err != nil {
		return 0, err
	}
	return v[0], nil
}
