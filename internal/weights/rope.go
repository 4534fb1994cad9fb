package weights

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// RopeConfig is one rotary-embedding setup (rope_parameters / rope_scaling),
// read as transformers' modeling_rope_utils reads it. The frequencies are
// computed by the model (internal/model/rope.go).
type RopeConfig struct {
	Type                string  // default, linear, dynamic, yarn, longrope, llama3, proportional
	Theta               float64 // base
	Factor              float64 // 0: absent
	LowFreqFactor       float64 // llama3
	HighFreqFactor      float64 // llama3
	OriginalMaxPosition int     // pre-training context (llama3, yarn, longrope, dynamic)
	PartialRotaryFactor float64 // fraction of head_dim rotated (1 = all)
	// AttentionFactor multiplies cos/sin (yarn, longrope); 0 means the
	// type's default (computed from the factor).
	AttentionFactor float64
	// Yarn: the ramp's rotation bounds (0: 32 and 1), the attention-factor
	// exponents (0: absent) and whether the ramp bounds are rounded
	// outwards to whole dimensions (transformers' truncate, default true).
	BetaFast, BetaSlow   float64
	Mscale, MscaleAllDim float64
	Truncate             bool
	// Longrope: per-frequency divisors for short and long contexts.
	ShortFactor, LongFactor []float64
	// MaxPosition is the config's max_position_embeddings (the extended
	// context the factor-less yarn and longrope variants divide by).
	MaxPosition int
}

// ropeKeys are the keys each rope_type understands, beyond the common
// rope_type/type, rope_theta and partial_rotary_factor. Anything else is an
// error naming the key: a setting the engine would silently ignore changes
// every position's angle.
var ropeKeys = map[string][]string{
	// Qwen3.5's multimodal rope sections: each frequency takes one of three
	// position streams, all equal to the token position in text, so with
	// the default rope they change nothing.
	"default":      {"mrope_section", "mrope_interleaved"},
	"linear":       {"factor"},
	"dynamic":      {"factor", "original_max_position_embeddings"},
	"yarn":         {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"},
	"longrope":     {"factor", "original_max_position_embeddings", "attention_factor", "short_factor", "long_factor"},
	"llama3":       {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
	"proportional": {"factor"},
}

func isPerLayerType(rp map[string]any) bool {
	for _, v := range rp {
		if _, ok := v.(map[string]any); !ok {
			return false
		}
	}
	return len(rp) > 0
}

// parseRope reads the model-wide rope: rope_parameters (transformers 5)
// or rope_scaling (older configs), over the top-level rope_theta.
func parseRope(raw map[string]any) (RopeConfig, error) {
	theta := 10000.0
	if t, ok := raw["rope_theta"].(float64); ok {
		theta = t
	}
	key, m := "rope", map[string]any(nil)
	if rp, ok := raw["rope_parameters"].(map[string]any); ok && !isPerLayerType(rp) {
		key, m = "rope_parameters", rp
	} else if rs, ok := raw["rope_scaling"].(map[string]any); ok {
		key, m = "rope_scaling", rs
	} else if v, ok := raw["rope_scaling"]; ok && v != nil {
		return RopeConfig{}, fmt.Errorf("rope_scaling: want an object, got %v", v)
	}
	r, err := ropeFrom(m, theta, raw)
	if err != nil {
		return r, fmt.Errorf("%s: %v", key, err)
	}
	if prf, ok := raw["partial_rotary_factor"].(float64); ok && r.PartialRotaryFactor == 1 {
		r.PartialRotaryFactor = prf
	}
	return r, nil
}

// ropeByLayerType reads rope_parameters keyed by layer type (Gemma 3/4).
func ropeByLayerType(raw map[string]any) (map[string]RopeConfig, error) {
	rp, ok := raw["rope_parameters"].(map[string]any)
	if !ok || !isPerLayerType(rp) {
		return nil, nil
	}
	out := map[string]RopeConfig{}
	for lt, v := range rp {
		r, err := ropeFrom(v.(map[string]any), 0, raw)
		if err != nil {
			return nil, fmt.Errorf("rope_parameters.%s: %v", lt, err)
		}
		out[lt] = r
	}
	return out, nil
}

// ropeFrom reads one rope block m (nil: the default rope at theta). raw
// is the whole config, for the keys transformers falls back to there
// (max_position_embeddings, original_max_position_embeddings).
func ropeFrom(m map[string]any, theta float64, raw map[string]any) (RopeConfig, error) {
	r := RopeConfig{Type: "default", Theta: theta, PartialRotaryFactor: 1, Truncate: true}
	r.MaxPosition, _ = asInt(raw["max_position_embeddings"])
	if m == nil {
		return r, nil
	}
	for _, k := range []string{"rope_type", "type"} {
		if v, ok := m[k]; ok && v != nil {
			s, ok := v.(string)
			if !ok {
				return r, fmt.Errorf("%s: want a string, got %v", k, v)
			}
			r.Type = s
			break
		}
	}
	allowed, ok := ropeKeys[r.Type]
	if !ok {
		return r, fmt.Errorf("rope_type %q is not supported (supported: %v)", r.Type, ropeTypes())
	}
	if err := checkRopeKeys(m, r.Type, allowed); err != nil {
		return r, err
	}
	if err := readRopeValues(&r, m, raw); err != nil {
		return r, err
	}
	return r, validateRope(r)
}

func ropeTypes() []string {
	var out []string
	for t := range ropeKeys {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

func checkRopeKeys(m map[string]any, typ string, allowed []string) error {
	var bad []string
	for k := range m {
		switch k {
		case "rope_type", "type", "rope_theta", "partial_rotary_factor":
			continue
		}
		if !slices.Contains(allowed, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("key %q is not understood for rope_type %q (it takes %v)", bad[0], typ, allowed)
	}
	return nil
}

// readRopeValues reads the numeric, boolean and list keys, each checked
// for its kind.
func readRopeValues(r *RopeConfig, m map[string]any, raw map[string]any) error {
	nums := []struct {
		key string
		dst *float64
	}{{"rope_theta", &r.Theta}, {"factor", &r.Factor}, {"low_freq_factor", &r.LowFreqFactor},
		{"high_freq_factor", &r.HighFreqFactor}, {"partial_rotary_factor", &r.PartialRotaryFactor},
		{"attention_factor", &r.AttentionFactor}, {"beta_fast", &r.BetaFast}, {"beta_slow", &r.BetaSlow},
		{"mscale", &r.Mscale}, {"mscale_all_dim", &r.MscaleAllDim}}
	for _, n := range nums {
		v, ok := m[n.key]
		if !ok || v == nil {
			continue
		}
		f, ok := v.(float64)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: want a number, got %v", n.key, v)
		}
		*n.dst = f
	}
	if v, ok := m["truncate"]; ok && v != nil {
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("truncate: want a boolean, got %v", v)
		}
		r.Truncate = b
	}
	for _, l := range []struct {
		key string
		dst *[]float64
	}{{"short_factor", &r.ShortFactor}, {"long_factor", &r.LongFactor}} {
		if v, ok := m[l.key]; ok && v != nil {
			f, err := floatList(v)
			if err != nil {
				return fmt.Errorf("%s: %v", l.key, err)
			}
			*l.dst = f
		}
	}
	// transformers 5 fills original_max_position_embeddings from the
	// config's own key, else max_position_embeddings.
	for _, v := range []any{m["original_max_position_embeddings"], raw["original_max_position_embeddings"]} {
		if v == nil {
			continue
		}
		n, ok := asInt(v)
		if !ok {
			return fmt.Errorf("original_max_position_embeddings: want an integer, got %v", v)
		}
		r.OriginalMaxPosition = n
		break
	}
	if r.OriginalMaxPosition == 0 && r.Type != "llama3" {
		r.OriginalMaxPosition = r.MaxPosition
	}
	return nil
}

func floatList(v any) ([]float64, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want a list of numbers, got %v", v)
	}
	out := make([]float64, len(l))
	for i, x := range l {
		f, ok := x.(float64)
		if !ok || !(f > 0) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("entry %d: want a positive number, got %v", i, x)
		}
		out[i] = f
	}
	return out, nil
}

// validateRope checks each type's required values.
func validateRope(r RopeConfig) error {
	switch r.Type {
	case "llama3":
		if r.Factor <= 0 || r.OriginalMaxPosition <= 0 || r.HighFreqFactor <= r.LowFreqFactor {
			return fmt.Errorf("llama3 rope needs factor, low/high_freq_factor and original_max_position_embeddings")
		}
	case "linear", "dynamic":
		if r.Factor <= 0 {
			return fmt.Errorf("%s rope needs a positive factor", r.Type)
		}
	case "yarn":
		if r.OriginalMaxPosition <= 0 {
			return fmt.Errorf("yarn rope needs original_max_position_embeddings (or max_position_embeddings)")
		}
		if r.Factor == 0 && r.MaxPosition > 0 {
			// transformers: a missing factor is the context's ratio.
			break
		}
		if r.Factor < 1 {
			return fmt.Errorf("factor: yarn needs a factor of at least 1, got %v", r.Factor)
		}
	case "longrope":
		if len(r.ShortFactor) == 0 || len(r.ShortFactor) != len(r.LongFactor) {
			return fmt.Errorf("longrope needs short_factor and long_factor lists of equal length")
		}
		if r.OriginalMaxPosition <= 0 {
			return fmt.Errorf("longrope needs original_max_position_embeddings")
		}
	}
	if r.AttentionFactor < 0 {
		return fmt.Errorf("attention_factor: %v is negative", r.AttentionFactor)
	}
	if r.Theta <= 0 {
		return fmt.Errorf("rope_theta must be positive")
	}
	return nil
}
