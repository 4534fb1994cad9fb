package model

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Gemma 4 text decoder, following transformers' modeling_gemma4.py
// (Gemma4TextModel / Gemma4TextDecoderLayer), as a gemmaSpec over the
// layer Gemma 3 shares (gemma.go):
//
//   - embeddings times sqrt(hidden). transformers keeps the scale as a
//     tensor cast to the weights' dtype, so it is bf16-rounded only when the
//     model runs in bf16 (sqrt(3072) = 55.4256 becomes 55.5); the reference
//     runs in float32 and so does this engine, hence the exact float32 value;
//   - RMSNorm is x * (mean(x^2)+eps)^-0.5 * w with a plain weight (not
//     Gemma 1-3's 1+w);
//   - sliding and full attention layers with their own geometry: full
//     layers take head_dim / num_key_value_heads from per_layer_config
//     (transformers >= 5.15) or global_head_dim / num_global_key_value_heads
//     (older configs), and with attention_k_eq_v have no v_proj: values are
//     the raw key projection;
//   - q and k RMSNorm per head, a weightless RMSNorm on values, attention
//     scale 1 (the q/k norms fix the magnitude), no attention soft-capping;
//   - RoPE per layer type: default for sliding layers, "proportional" with
//     partial_rotary_factor for full ones (see proportionalRope);
//   - a GELU-tanh gated MLP between pre/post feed-forward norms, and the
//     attention output normalised before its residual add;
//   - layer_scalar multiplies the whole residual stream after the layer;
//   - final logits soft-capped: cap * tanh(logits / cap).
//
// Sliding layers see `window` tokens including the current one (the
// transformers mask is kv > q - window), which is the backend's
// AttnParams.Window semantics.
//
// KV memory: sliding layers report their window in KV(), so a backend
// that supports it keeps them in a ring per sequence slot of window +
// step-size tokens (backend.KVSpec Slots/RingTokens; docs/kv-cache.md)
// and their memory no longer grows with the context. Full layers, and
// sliding ones on a backend without rings, use the paged cache.
//
// The E-series' per-layer inputs and KV sharing are in gemma4_ple.go, the
// 26B-A4B MoE block in gemma4_moe.go. Bidirectional attention is refused
// at load. The vision and audio towers of multimodal checkpoints are
// skipped by the checkpoint reader (Checkpoint.Skipped).
func init() {
	Register("gemma4_text", buildGemma4)
	// A multimodal config whose text_config lacks model_type.
	Register("gemma4", buildGemma4)
}

// gemma4DefaultRope is transformers' rope_parameters default per layer type.
var gemma4DefaultRope = map[string]weights.RopeConfig{
	"sliding_attention": {Type: "default", Theta: 10000, PartialRotaryFactor: 1},
	"full_attention":    {Type: "proportional", Theta: 1e6, PartialRotaryFactor: 0.25},
}

// gemma4LayerTypes returns config's layer_types, or transformers' default
// (five sliding layers then one full, the last layer always full).
func gemma4LayerTypes(cfg *weights.Config) ([]string, error) {
	types := cfg.LayerTypes
	if types == nil {
		for i := range cfg.Layers {
			t := "sliding_attention"
			if (i+1)%6 == 0 {
				t = "full_attention"
			}
			types = append(types, t)
		}
	}
	if len(types) != cfg.Layers {
		return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(types), cfg.Layers)
	}
	types = append([]string(nil), types...)
	// transformers forces the last layer to full attention (with a warning).
	types[len(types)-1] = "full_attention"
	for i, t := range types {
		if t != "sliding_attention" && t != "full_attention" {
			return nil, fmt.Errorf("layer %d: unsupported layer type %q", i, t)
		}
	}
	return types, nil
}

// gemma4Geometry is layer i's head dim and KV head count.
func gemma4Geometry(cfg *weights.Config, i int, sliding bool) (headDim, kvHeads int) {
	headDim, kvHeads = cfg.HeadDim, cfg.KVHeads
	if sliding {
		return
	}
	if o, ok := cfg.PerLayer[i]; ok {
		if o.HeadDim > 0 {
			headDim = o.HeadDim
		}
		if o.KVHeads > 0 {
			kvHeads = o.KVHeads
		}
		return
	}
	if cfg.GlobalHeadDim > 0 {
		headDim = cfg.GlobalHeadDim
	}
	if cfg.AttentionKEqV && cfg.GlobalKVHeads > 0 {
		kvHeads = cfg.GlobalKVHeads
	}
	return
}

// gemma4Unsupported names config features this builder does not run.
func gemma4Unsupported(cfg *weights.Config) error {
	if cfg.Raw["use_bidirectional_attention"] == "all" {
		return fmt.Errorf("gemma4: bidirectional attention is not supported")
	}
	return nil
}

func buildGemma4(cfg *weights.Config, src Source, m *Model) error {
	if err := gemma4Unsupported(cfg); err != nil {
		return err
	}
	types, err := gemma4LayerTypes(cfg)
	if err != nil {
		return err
	}
	if err := loadTop(cfg, src, m); err != nil {
		return err
	}
	m.EmbedScale = float32(math.Sqrt(float64(cfg.Hidden)))
	m.FinalSoftcap = float32(cfg.FinalLogitSoftcap)
	moe, err := gemma4MoELoader(cfg, src, m.be)
	if err != nil {
		return err
	}
	act, err := activation(cfg.HiddenAct)
	if err != nil {
		return err
	}
	ple, err := loadGemma4PLE(cfg, src, m, act)
	if err != nil {
		return err
	}
	kvFrom, err := gemma4KVFrom(cfg, types)
	if err != nil {
		return err
	}
	if kvFrom != nil && !backend.Supports(m.be, backend.FeatureSharedKV) {
		return fmt.Errorf("gemma4: KV-shared layers need %s, which the %s backend does not run", backend.FeatureSharedKV, m.be.Name())
	}
	doubleWide := cfg.Raw["use_double_wide_mlp"] == true
	return buildGemmaLayers(cfg, src, m, gemmaSpec{
		types:    types,
		geometry: func(i int, sliding bool) (int, int) { return gemma4Geometry(cfg, i, sliding) },
		rope: func(typ string) weights.RopeConfig {
			if rc, ok := cfg.RopeByLayerType[typ]; ok {
				return rc
			}
			return gemma4DefaultRope[typ]
		},
		scale: func(int) float32 { return 1 },
		vNorm: true,
		kEqV:  cfg.AttentionKEqV,
		norm:  func(name string, n int) (backend.Weight, error) { return src.Dense(name, n) },
		moe:   moe,
		ple:   ple,
		kvFrom: func(i int) int {
			if kvFrom == nil {
				return -1
			}
			return kvFrom[i]
		},
		inter: func(i int) int {
			if doubleWide && kvFrom != nil && kvFrom[i] >= 0 {
				return 2 * cfg.Intermediate
			}
			return cfg.Intermediate
		},
	})
}
