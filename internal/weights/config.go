package weights

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/mlxcel/mlxcel/internal/quant"
)

// LayerOverride is a per-layer geometry override (Gemma 4 per_layer_config).
type LayerOverride struct {
	HeadDim, KVHeads int
}

// QuantSpec is one quantization setting. Mode is "affine" (also when the
// config gives none) or one of MLX's floating-point modes (quant.MXFP4,
// NVFP4, MXFP8).
type QuantSpec struct {
	Bits, GroupSize int
	Mode            string
}

// QuantConfig is config.json's "quantization" block: a default plus
// per-module overrides keyed by module path. An override may also say a
// module is not quantized at all.
type QuantConfig struct {
	Default   *QuantSpec
	Overrides map[string]*QuantSpec // nil value: explicitly not quantized
	// Method is quantization_config.quant_method when it names a
	// checkpoint layout other than MLX's ("mxfp4": openai's *_blocks /
	// *_scales experts, read by the model that knows those names).
	Method string
}

// For returns the setting for module path (e.g. "model.layers.0.mlp.gate").
func (q QuantConfig) For(module string) (QuantSpec, bool) {
	if s, ok := q.Overrides[module]; ok {
		if s == nil {
			return QuantSpec{}, false
		}
		return *s, true
	}
	if q.Default == nil {
		return QuantSpec{}, false
	}
	return *q.Default, true
}

// Config is the architecture description the models need, parsed from
// config.json (the text_config of multimodal checkpoints).
type Config struct {
	Path          string
	ModelType     string
	Architectures []string

	Hidden, Intermediate, Layers int
	Heads, KVHeads, HeadDim      int
	Vocab, MaxPosition           int
	RMSNormEps                   float64
	HiddenAct                    string
	TieEmbeddings                bool
	AttentionBias                bool
	Rope                         RopeConfig
	BOS, EOS                     []int32

	// Mixture of experts (Qwen3-MoE, Mixtral).
	NumExperts, TopK, MoEIntermediate int
	NormTopKProb                      bool
	DecoderSparseStep                 int
	MLPOnlyLayers                     []int

	// Gemma 4 and other hybrid-attention models.
	LayerTypes        []string
	SlidingWindow     int
	FinalLogitSoftcap float64
	AttnLogitSoftcap  float64
	PerLayer          map[int]LayerOverride
	GlobalHeadDim     int
	GlobalKVHeads     int
	AttentionKEqV     bool
	RopeByLayerType   map[string]RopeConfig

	Quant QuantConfig

	// Raw is the (text) config object, for fields a model reads itself.
	Raw map[string]any
}

// LoadConfig reads dir/config.json.
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	if err := RegularFile(path); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	c.Path = path
	return c, nil
}

// field reads one config key into the Config; keys are tried in order.
type field struct {
	keys []string
	set  func(c *Config, v any) error
}

func intField(dst func(*Config) *int, keys ...string) field {
	return field{keys, func(c *Config, v any) error {
		n, ok := asInt(v)
		if !ok {
			return fmt.Errorf("want an integer, got %v", v)
		}
		*dst(c) = n
		return nil
	}}
}

func floatField(dst func(*Config) *float64, keys ...string) field {
	return field{keys, func(c *Config, v any) error {
		f, ok := v.(float64)
		if !ok {
			return fmt.Errorf("want a number, got %v", v)
		}
		*dst(c) = f
		return nil
	}}
}

func boolField(dst func(*Config) *bool, keys ...string) field {
	return field{keys, func(c *Config, v any) error {
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("want a boolean, got %v", v)
		}
		*dst(c) = b
		return nil
	}}
}

func stringField(dst func(*Config) *string, keys ...string) field {
	return field{keys, func(c *Config, v any) error {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("want a string, got %v", v)
		}
		*dst(c) = s
		return nil
	}}
}

func idsField(dst func(*Config) *[]int32, keys ...string) field {
	return field{keys, func(c *Config, v any) error {
		ids, err := asIDs(v)
		*dst(c) = ids
		return err
	}}
}

// configFields is the table of scalar keys; the first key present wins.
var configFields = []field{
	stringField(func(c *Config) *string { return &c.ModelType }, "model_type"),
	intField(func(c *Config) *int { return &c.Hidden }, "hidden_size", "dim"),
	intField(func(c *Config) *int { return &c.Intermediate }, "intermediate_size"),
	intField(func(c *Config) *int { return &c.Layers }, "num_hidden_layers"),
	intField(func(c *Config) *int { return &c.Heads }, "num_attention_heads"),
	intField(func(c *Config) *int { return &c.KVHeads }, "num_key_value_heads"),
	intField(func(c *Config) *int { return &c.HeadDim }, "head_dim"),
	intField(func(c *Config) *int { return &c.Vocab }, "vocab_size"),
	intField(func(c *Config) *int { return &c.MaxPosition }, "max_position_embeddings"),
	floatField(func(c *Config) *float64 { return &c.RMSNormEps }, "rms_norm_eps"),
	stringField(func(c *Config) *string { return &c.HiddenAct }, "hidden_act", "hidden_activation"),
	boolField(func(c *Config) *bool { return &c.TieEmbeddings }, "tie_word_embeddings"),
	boolField(func(c *Config) *bool { return &c.AttentionBias }, "attention_bias"),
	idsField(func(c *Config) *[]int32 { return &c.BOS }, "bos_token_id"),
	idsField(func(c *Config) *[]int32 { return &c.EOS }, "eos_token_id"),
	intField(func(c *Config) *int { return &c.NumExperts }, "num_experts", "num_local_experts"),
	intField(func(c *Config) *int { return &c.TopK }, "num_experts_per_tok", "top_k_experts"),
	intField(func(c *Config) *int { return &c.MoEIntermediate }, "moe_intermediate_size"),
	boolField(func(c *Config) *bool { return &c.NormTopKProb }, "norm_topk_prob"),
	intField(func(c *Config) *int { return &c.DecoderSparseStep }, "decoder_sparse_step"),
	intField(func(c *Config) *int { return &c.SlidingWindow }, "sliding_window"),
	floatField(func(c *Config) *float64 { return &c.FinalLogitSoftcap }, "final_logit_softcapping"),
	floatField(func(c *Config) *float64 { return &c.AttnLogitSoftcap }, "attn_logit_softcapping"),
	intField(func(c *Config) *int { return &c.GlobalHeadDim }, "global_head_dim"),
	intField(func(c *Config) *int { return &c.GlobalKVHeads }, "num_global_key_value_heads"),
	boolField(func(c *Config) *bool { return &c.AttentionKEqV }, "attention_k_eq_v"),
	{[]string{"architectures"}, func(c *Config, v any) error {
		l, _ := v.([]any)
		for _, a := range l {
			if s, ok := a.(string); ok {
				c.Architectures = append(c.Architectures, s)
			}
		}
		return nil
	}},
	{[]string{"mlp_only_layers"}, func(c *Config, v any) error {
		l, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want a list")
		}
		for _, x := range l {
			n, ok := asInt(x)
			if !ok {
				return fmt.Errorf("want integers")
			}
			c.MLPOnlyLayers = append(c.MLPOnlyLayers, n)
		}
		return nil
	}},
	{[]string{"layer_types"}, func(c *Config, v any) error {
		l, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want a list")
		}
		for _, x := range l {
			s, _ := x.(string)
			c.LayerTypes = append(c.LayerTypes, s)
		}
		return nil
	}},
	{[]string{"per_layer_config"}, func(c *Config, v any) error {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("want an object")
		}
		c.PerLayer = map[int]LayerOverride{}
		for k, x := range m {
			i, err := strconv.Atoi(k)
			if err != nil {
				return fmt.Errorf("layer key %q is not a number", k)
			}
			o, _ := x.(map[string]any)
			var lo LayerOverride
			lo.HeadDim, _ = asInt(o["head_dim"])
			lo.KVHeads, _ = asInt(o["num_key_value_heads"])
			c.PerLayer[i] = lo
		}
		return nil
	}},
}

// ParseConfig parses config.json bytes. It never panics on malformed input.
func ParseConfig(b []byte) (*Config, error) {
	var top map[string]any
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	if top == nil {
		return nil, fmt.Errorf("config is not a JSON object")
	}
	raw := top
	// Multimodal checkpoints nest the language model's config.
	if tc, ok := top["text_config"].(map[string]any); ok {
		raw = map[string]any{}
		for k, v := range top {
			raw[k] = v
		}
		for k, v := range tc {
			if k == "model_type" && top["model_type"] != nil {
				raw["text_model_type"] = v
				continue
			}
			if k == "architectures" {
				continue
			}
			raw[k] = v
		}
	}
	applyTextDefaults(raw)
	c := &Config{Raw: raw, NormTopKProb: false, DecoderSparseStep: 1}
	for _, f := range configFields {
		for _, k := range f.keys {
			v, ok := raw[k]
			if !ok || v == nil {
				continue
			}
			if err := f.set(c, v); err != nil {
				return nil, fmt.Errorf("%s: %v", k, err)
			}
			break
		}
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	var err error
	if c.Rope, err = parseRope(raw); err != nil {
		return nil, err
	}
	if c.RopeByLayerType, err = ropeByLayerType(raw); err != nil {
		return nil, err
	}
	if c.Quant, err = parseQuant(top); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks that the fields every decoder needs are present and sane.
func (c *Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"hidden_size", c.Hidden}, {"num_hidden_layers", c.Layers}, {"num_attention_heads", c.Heads},
		{"vocab_size", c.Vocab}, {"intermediate_size", max(c.Intermediate, c.moeOnlyWidth())}} {
		if f.v <= 0 {
			return fmt.Errorf("%s: missing or not positive (%d)", f.name, f.v)
		}
	}
	if c.KVHeads <= 0 || c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("num_key_value_heads %d does not divide num_attention_heads %d", c.KVHeads, c.Heads)
	}
	if c.Layers > 1024 || c.Hidden > 1<<17 || c.Vocab > 1<<22 {
		return fmt.Errorf("implausible sizes (layers %d, hidden %d, vocab %d)", c.Layers, c.Hidden, c.Vocab)
	}
	return c.validateOptional()
}

// SparseLayer is transformers' Qwen3-MoE rule, which Mixtral (setting
// neither field) also follows: layer i is MoE unless it is listed in
// mlp_only_layers, and only every decoder_sparse_step-th layer (counting
// from 1) is; the others keep a dense MLP of intermediate_size. Shared by
// the model builders and the tensor-parallel planner.
func (c *Config) SparseLayer(i int) bool {
	return !slices.Contains(c.MLPOnlyLayers, i) && c.NumExperts > 0 && c.DecoderSparseStep > 0 && (i+1)%c.DecoderSparseStep == 0
}

// moeOnlyWidth is moe_intermediate_size for configs whose every layer is
// MoE and that give no dense intermediate_size (Qwen3.5 MoE), else 0.
func (c *Config) moeOnlyWidth() int {
	if _, ok := c.Raw["intermediate_size"]; ok || c.NumExperts <= 0 {
		return 0
	}
	return c.MoEIntermediate
}

// validateOptional checks keys that may be absent but, when given, must
// make sense: a max_position_embeddings of 0 must not silently become a
// default context.
func (c *Config) validateOptional() error {
	for _, f := range []struct {
		key string
		min int
	}{{"max_position_embeddings", 1}, {"head_dim", 1}, {"sliding_window", 0},
		{"num_experts", 0}, {"num_local_experts", 0}, {"num_experts_per_tok", 0}} {
		// The raw value: ParseConfig replaces some zeros by defaults.
		if v, ok := asInt(c.Raw[f.key]); ok && v < f.min {
			return fmt.Errorf("%s: %d is not a valid value (at least %d)", f.key, v, f.min)
		}
	}
	if c.MaxPosition > 1<<24 {
		return fmt.Errorf("max_position_embeddings: %d is implausible", c.MaxPosition)
	}
	if c.NumExperts > 0 && c.TopK > c.NumExperts {
		return fmt.Errorf("num_experts_per_tok %d exceeds the %d experts", c.TopK, c.NumExperts)
	}
	if !(c.RMSNormEps > 0) || math.IsInf(c.RMSNormEps, 0) {
		return fmt.Errorf("rms_norm_eps: %v is not a positive number", c.RMSNormEps)
	}
	if !(c.Rope.Theta > 0) || math.IsInf(c.Rope.Theta, 0) {
		return fmt.Errorf("rope_theta: %v is not a positive number", c.Rope.Theta)
	}
	return nil
}

func parseQuant(top map[string]any) (QuantConfig, error) {
	q := QuantConfig{Overrides: map[string]*QuantSpec{}}
	m, ok := top["quantization"].(map[string]any)
	if !ok {
		m, ok = top["quantization_config"].(map[string]any)
		if !ok {
			return q, nil
		}
		switch qm, _ := m["quant_method"].(string); qm {
		case "", "mlx":
		case quant.MXFP4:
			q.Method = qm
			return q, nil
		default:
			return q, fmt.Errorf("quantization_config: quant_method %q is not supported (MLX, or openai's mxfp4)", qm)
		}
	}
	spec, err := quantSpec(m)
	if err != nil {
		return q, fmt.Errorf("quantization: %v", err)
	}
	q.Default = spec
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := m[k].(type) {
		case bool:
			if v {
				q.Overrides[k] = q.Default
			} else {
				q.Overrides[k] = nil
			}
		case map[string]any:
			s, err := quantSpec(v)
			if err != nil {
				return q, fmt.Errorf("quantization.%s: %v", k, err)
			}
			q.Overrides[k] = s
		}
		if ov, ok := q.Overrides[k]; ok {
			// Overrides may use the checkpoint's own prefix
			// (language_model.model.*); models ask by canonical name.
			q.Overrides[Canonical(k)] = ov
		}
	}
	return q, nil
}

func quantSpec(m map[string]any) (*QuantSpec, error) {
	bits, okB := asInt(m["bits"])
	group, okG := asInt(m["group_size"])
	if !okB && !okG {
		return nil, nil
	}
	mode := quant.Affine
	if v, ok := m["mode"]; ok {
		mode, _ = v.(string)
	}
	if mode != quant.Affine {
		return fpQuantSpec(mode, bits, group)
	}
	switch bits {
	case 2, 3, 4, 5, 6, 8:
	default:
		return nil, fmt.Errorf("bits %d not supported (2, 3, 4, 5, 6, 8)", bits)
	}
	switch group {
	case 32, 64, 128:
	default:
		return nil, fmt.Errorf("group_size %d not supported (32, 64, 128)", group)
	}
	return &QuantSpec{Bits: bits, GroupSize: group, Mode: quant.Affine}, nil
}

// fpQuantSpec checks a floating-point mode's bits and group against the
// only ones MLX accepts for it.
func fpQuantSpec(mode string, bits, group int) (*QuantSpec, error) {
	wb, wg, ok := quant.FPParams(mode)
	if !ok {
		return nil, fmt.Errorf("mode %q is not supported (affine, mxfp4, nvfp4, mxfp8)", mode)
	}
	if bits != wb || group != wg {
		return nil, fmt.Errorf("mode %s needs bits %d and group_size %d, config says %d and %d", mode, wb, wg, bits, group)
	}
	return &QuantSpec{Bits: bits, GroupSize: group, Mode: mode}, nil
}

func asInt(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f != float64(int(f)) || f < -1<<31 || f > 1<<31 {
		return 0, false
	}
	return int(f), true
}

func asIDs(v any) ([]int32, error) {
	switch x := v.(type) {
	case float64:
		n, ok := asInt(x)
		if !ok {
			return nil, fmt.Errorf("want a token id, got %v", x)
		}
		return []int32{int32(n)}, nil
	case []any:
		var out []int32
		for _, e := range x {
			n, ok := asInt(e)
			if !ok {
				return nil, fmt.Errorf("want token ids, got %v", e)
			}
			out = append(out, int32(n))
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a token id or a list, got %v", v)
}
