package model

import (
	"fmt"
	"strings"

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
	attn             mixer
	ffn              FFN
	hidden           int
	eps              float32
}

// mixer is a layer's token mixer: attention over the KV cache, or Qwen3.5's
// linear attention over a recurrent state (qwen35_deltanet.go).
type mixer interface {
	Forward(s *Step, h, out backend.Tensor)
	KV() backend.KVLayer
}

func (l *llamaLayer) KV() backend.KVLayer { return l.attn.KV() }

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
	windows, err := llamaWindows(cfg)
	if err != nil {
		return err
	}
	for i := range cfg.Layers {
		p.Window = windows[i]
		prefix := fmt.Sprintf("model.layers.%d", i)
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
		l.attn = a
		if l.ffn, err = ffn(i, prefix); err != nil {
			return err
		}
		m.Layers = append(m.Layers, l)
	}
	return nil
}

// llamaWindows is each layer's sliding window (0: full attention), as
// transformers decides it: layer_types when the config has them; else
// Mistral's and Mixtral's sliding_window on every layer whenever it is
// set; else Qwen's use_sliding_window from layer max_window_layers on.
// The window counts the current token, as AttnParams.Window does.
func llamaWindows(cfg *weights.Config) ([]int, error) {
	w := make([]int, cfg.Layers)
	if cfg.LayerTypes != nil {
		if len(cfg.LayerTypes) != cfg.Layers {
			return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(cfg.LayerTypes), cfg.Layers)
		}
		for i, t := range cfg.LayerTypes {
			switch {
			case t == "full_attention":
			case t == "sliding_attention" && cfg.SlidingWindow > 0:
				w[i] = cfg.SlidingWindow
			case t == "sliding_attention":
				return nil, fmt.Errorf("layer %d is sliding_attention but sliding_window is not set", i)
			default:
				return nil, fmt.Errorf("layer %d: unsupported layer type %q", i, t)
			}
		}
		return w, nil
	}
	mt := cfg.ModelType
	if t, ok := cfg.Raw["text_model_type"].(string); ok {
		mt = t
	}
	from := cfg.Layers // first windowed layer
	switch {
	case mt == "mistral" || mt == "mixtral":
		from = 0
	case strings.HasPrefix(mt, "qwen") && cfg.Raw["use_sliding_window"] == true:
		from = 0
		if f, ok := cfg.Raw["max_window_layers"].(float64); ok {
			from = int(f)
		}
	}
	for i := from; i < cfg.Layers && cfg.SlidingWindow > 0; i++ {
		w[i] = cfg.SlidingWindow
	}
	return w, nil
}

// loadTop reads the embedding, final norm and LM head: tied when the
// config says so (a stored lm_head is then ignored, as transformers ties
// it) or says nothing and the checkpoint has none; a config that unties
// them needs the lm_head.
func loadTop(cfg *weights.Config, src Source, m *Model) error {
	return loadTopNorm(cfg, src, m, func(name string, n int) (backend.Weight, error) { return src.Dense(name, n) })
}

// loadTopNorm is loadTop with the final norm read through norm (Gemma 3
// offsets its weights).
func loadTopNorm(cfg *weights.Config, src Source, m *Model, norm func(name string, n int) (backend.Weight, error)) error {
	var err error
	if m.Embed, err = src.Linear("model.embed_tokens", cfg.Vocab, cfg.Hidden); err != nil {
		return err
	}
	if m.Norm, err = norm("model.norm.weight", cfg.Hidden); err != nil {
		return err
	}
	hasHead := src.Has("lm_head.weight")
	switch {
	case cfg.TieEmbeddings:
		if ig, ok := src.(ignorer); ok && hasHead {
			ig.Ignore("lm_head.weight", "lm_head.scales", "lm_head.biases")
		}
		m.LMHead = m.Embed
		return nil
	case !hasHead && cfg.Raw["tie_word_embeddings"] == false:
		return fmt.Errorf("tie_word_embeddings is false but the checkpoint has no lm_head.weight")
	case !hasHead:
		m.LMHead = m.Embed
		return nil
	}
	m.LMHead, err = src.Linear("lm_head", cfg.Vocab, cfg.Hidden)
	return err
}
