package model

import (
	"fmt"
	"slices"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// The Llama family: pre-norm decoder layers with GQA attention and a gated
// MLP (or a routed MoE). Qwen2 adds q/k/v biases, Qwen3 per-head q/k
// RMSNorm; Mixtral and Qwen3-MoE swap the MLP for experts. Those
// differences are read off the checkpoint and config, not per-model code.
func init() {
	for _, t := range []string{"llama", "qwen2", "qwen3", "mistral"} {
		Register(t, buildLlama)
	}
}

// llamaLayer is input_layernorm -> attention -> residual ->
// post_attention_layernorm -> FFN -> residual.
type llamaLayer struct {
	inNorm, postNorm backend.Weight
	attn             *Attention
	ffn              FFN
	hidden           int
	eps              float32
}

func (l *llamaLayer) KV() backend.KVLayer {
	p := l.attn.Params
	// The window tells the backend it may keep this layer's KV in a
	// bounded per-sequence ring instead of the paged blocks.
	return backend.KVLayer{KVHeads: p.KVHeads, HeadDim: p.HeadDim, Window: p.Window}
}

func (l *llamaLayer) Forward(s *Step, x backend.Tensor) {
	b := s.B
	h := s.Scratch("h", l.hidden)
	o := s.Scratch("o", l.hidden)
	b.RMSNorm(h, x, l.inNorm, l.eps)
	l.attn.Forward(s, h, o)
	b.Add(x, x, o)
	b.RMSNorm(h, x, l.postNorm, l.eps)
	l.ffn.Forward(s, h, o)
	b.Add(x, x, o)
}

// buildLlama loads the top-level weights and layers; ffn picks each
// layer's feed-forward block (a dense MLP for the plain family).
func buildLlama(cfg *weights.Config, src Source, m *Model) error {
	return buildLlamaWith(cfg, src, m, func(i int, prefix string) (FFN, error) {
		act, err := activation(cfg.HiddenAct)
		if err != nil {
			return nil, err
		}
		return LoadMLP(src, prefix+".mlp", cfg.Hidden, cfg.Intermediate, act)
	})
}

// buildLlamaWith is the shared builder; MoE families pass their own ffn.
func buildLlamaWith(cfg *weights.Config, src Source, m *Model, ffn func(i int, prefix string) (FFN, error)) error {
	var err error
	if err = loadTop(cfg, src, m); err != nil {
		return err
	}
	rope, err := ropeFor(cfg.Rope, cfg.HeadDim)
	if err != nil {
		return err
	}
	eps := float32(cfg.RMSNormEps)
	p := backend.AttnParams{Heads: cfg.Heads, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, Scale: DefaultScale(cfg.HeadDim)}
	if cfg.SlidingWindow > 0 && slices.Contains(cfg.LayerTypes, "sliding_attention") {
		return fmt.Errorf("%s: sliding-window layers are not supported for %s", cfg.Path, cfg.ModelType)
	}
	for i := range cfg.Layers {
		prefix := fmt.Sprintf("model.layers.%d", i)
		l := &llamaLayer{hidden: cfg.Hidden, eps: eps}
		if l.inNorm, err = src.Dense(prefix+".input_layernorm.weight", cfg.Hidden); err != nil {
			return err
		}
		if l.postNorm, err = src.Dense(prefix+".post_attention_layernorm.weight", cfg.Hidden); err != nil {
			return err
		}
		if l.attn, err = LoadAttention(src, prefix+".self_attn", cfg.Hidden, p, eps); err != nil {
			return err
		}
		l.attn.Rope = rope
		if l.ffn, err = ffn(i, prefix); err != nil {
			return err
		}
		m.Layers = append(m.Layers, l)
	}
	return nil
}

// loadTop reads the embedding, final norm and LM head (tied when the
// config says so or the checkpoint has no lm_head).
func loadTop(cfg *weights.Config, src Source, m *Model) error {
	var err error
	if m.Embed, err = src.Linear("model.embed_tokens", cfg.Vocab, cfg.Hidden); err != nil {
		return err
	}
	if m.Norm, err = src.Dense("model.norm.weight", cfg.Hidden); err != nil {
		return err
	}
	if cfg.TieEmbeddings || !src.Has("lm_head.weight") {
		m.LMHead = m.Embed
		return nil
	}
	m.LMHead, err = src.Linear("lm_head", cfg.Vocab, cfg.Hidden)
	return err
}
