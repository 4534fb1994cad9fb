package model

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/weights"
)

// periodicLayerTypes is cfg's layer_types or, when the config has none,
// every period-th layer "full_attention" and the others other: the period
// is the first of keys the config sets, else def (Gemma 3's
// sliding_window_pattern, Qwen3.5's full_attention_interval). Either way
// there must be one entry a layer, each full_attention or other.
func periodicLayerTypes(cfg *weights.Config, keys []string, def int, other string) ([]string, error) {
	types := cfg.LayerTypes
	if types == nil {
		period := def
		for _, k := range keys {
			if f, ok := cfg.Raw[k].(float64); ok {
				period = int(f)
				break
			}
		}
		if period <= 0 {
			return nil, fmt.Errorf("%s %d must be positive", keys[0], period)
		}
		for i := range cfg.Layers {
			t := other
			if (i+1)%period == 0 {
				t = "full_attention"
			}
			types = append(types, t)
		}
	}
	if len(types) != cfg.Layers {
		return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(types), cfg.Layers)
	}
	for i, t := range types {
		if t != other && t != "full_attention" {
			return nil, fmt.Errorf("layer %d: unsupported layer type %q", i, t)
		}
	}
	return types, nil
}
