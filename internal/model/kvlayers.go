package model

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// KVGeometry is a family's KV layers from the config alone: what the
// built model's KVLayers returns, known before any weight is read, so the
// memory estimates (internal/memplan, the server's KV sizing, inspect)
// size the store the backend will allocate. TestKVLayersForMatchesBuild
// holds every family's geometry to its builder on the fixtures.
type KVGeometry func(cfg *weights.Config) ([]backend.KVLayer, error)

var kvGeometries = map[string]KVGeometry{}

// RegisterKV sets modelType's KVGeometry; a family without one has the
// Llama family's (cfg's KV heads and head dim, llamaWindows' windows).
func RegisterKV(modelType string, g KVGeometry) { kvGeometries[modelType] = g }

// familyType is the model_type Build picks the family by.
func familyType(cfg *weights.Config) string {
	mt := cfg.ModelType
	if t, ok := cfg.Raw["text_model_type"].(string); ok && families[mt] == nil {
		mt = t
	}
	return mt
}

// KVLayersFor is the KV geometry of every layer of a model of cfg, as
// Model.KVLayers of the built model reports it.
func KVLayersFor(cfg *weights.Config) ([]backend.KVLayer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mt := familyType(cfg)
	if families[mt] == nil {
		return nil, fmt.Errorf("unsupported architecture %q (supported: %v)", cfg.ModelType, Supported())
	}
	if g := kvGeometries[mt]; g != nil {
		return g(cfg)
	}
	windows, err := llamaWindows(cfg)
	if err != nil {
		return nil, err
	}
	out := make([]backend.KVLayer, cfg.Layers)
	for i := range out {
		out[i] = backend.KVLayer{KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, Window: windows[i]}
	}
	return out, nil
}

// typedKV is the geometry of layers given by type: sliding layers get
// cfg's window, linear ones (Qwen3.5) their recurrent state.
func typedKV(cfg *weights.Config, types []string, geometry func(i int, sliding bool) (headDim, kvHeads int)) []backend.KVLayer {
	out := make([]backend.KVLayer, len(types))
	for i, t := range types {
		if t == "linear_attention" {
			out[i] = backend.KVLayer{DeltaNet: qwen35DeltaNetParams(cfg)}
			continue
		}
		sliding := t == "sliding_attention"
		out[i].HeadDim, out[i].KVHeads = cfg.HeadDim, cfg.KVHeads
		if geometry != nil {
			out[i].HeadDim, out[i].KVHeads = geometry(i, sliding)
		}
		if sliding {
			out[i].Window = cfg.SlidingWindow
		}
	}
	return out
}

func init() {
	gemma3 := func(cfg *weights.Config) ([]backend.KVLayer, error) {
		types, err := gemma3LayerTypes(cfg)
		if err != nil {
			return nil, err
		}
		return typedKV(cfg, types, nil), nil
	}
	gemma4 := func(cfg *weights.Config) ([]backend.KVLayer, error) {
		types, err := gemma4LayerTypes(cfg)
		if err != nil {
			return nil, err
		}
		from, err := gemma4KVFrom(cfg, types)
		if err != nil {
			return nil, err
		}
		out := typedKV(cfg, types, func(i int, sliding bool) (int, int) { return gemma4Geometry(cfg, i, sliding) })
		for i := range from {
			out[i].Shared = from[i] >= 0
		}
		return out, nil
	}
	gptOss := func(cfg *weights.Config) ([]backend.KVLayer, error) {
		types, err := gptOssLayerTypes(cfg)
		if err != nil {
			return nil, err
		}
		return typedKV(cfg, types, nil), nil
	}
	qwen35 := func(cfg *weights.Config) ([]backend.KVLayer, error) {
		types, err := qwen35LayerTypes(cfg)
		if err != nil {
			return nil, err
		}
		return typedKV(cfg, types, nil), nil
	}
	for t, g := range map[string]KVGeometry{"gemma3_text": gemma3, "gemma3": gemma3, "gemma4_text": gemma4, "gemma4": gemma4,
		"gpt_oss": gptOss, "qwen3_5": qwen35, "qwen3_5_text": qwen35, "qwen3_5_moe": qwen35, "qwen3_5_moe_text": qwen35} {
		RegisterKV(t, g)
	}
}
