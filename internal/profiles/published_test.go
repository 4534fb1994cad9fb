package profiles

import (
	"encoding/json"
	"testing"
)

// shape is what a profile must say, from the model's published
// config.json (text_config for the multimodal wrappers).
type shape struct {
	modelType, textType                          string
	layers, hidden, inter, heads, kvHeads, hdim  int
	vocab, experts, topK, expertInter, sharedInt int
	fullEvery                                    int // a full-attention layer every n (0: sliding/full as listed)
	extra                                        map[string]any
}

// published are the profiles written from the models' config.json
// (README.md: provenance), with the values they must carry, so that a
// typo in the JSON is caught.
var published = map[string]*shape{
	"gpt-oss-20b-mxfp4-q8": {modelType: "gpt_oss", layers: 24, hidden: 2880, inter: 2880, heads: 64, kvHeads: 8, hdim: 64,
		vocab: 201088, experts: 32, topK: 4, extra: map[string]any{"sliding_window": 128.0, "swiglu_limit": 7.0}},
	"gpt-oss-120b-mxfp4-q8": {modelType: "gpt_oss", layers: 36, hidden: 2880, inter: 2880, heads: 64, kvHeads: 8, hdim: 64,
		vocab: 201088, experts: 128, topK: 4, extra: map[string]any{"sliding_window": 128.0}},
	"qwen3.5-27b-4bit": {modelType: "qwen3_5", textType: "qwen3_5_text", layers: 64, hidden: 5120, inter: 17408, heads: 24,
		kvHeads: 4, hdim: 256, vocab: 248320, fullEvery: 4,
		extra: map[string]any{"linear_num_key_heads": 16.0, "linear_num_value_heads": 48.0, "linear_key_head_dim": 128.0}},
	"qwen3.5-35b-a3b-4bit": {modelType: "qwen3_5_moe", textType: "qwen3_5_moe_text", layers: 40, hidden: 2048, heads: 16,
		kvHeads: 2, hdim: 256, vocab: 248320, experts: 256, topK: 8, expertInter: 512, sharedInt: 512, fullEvery: 4,
		extra: map[string]any{"linear_num_key_heads": 16.0, "linear_num_value_heads": 32.0}},
	"gemma-4-26b-a4b-it-4bit": {modelType: "gemma4", textType: "gemma4_text", layers: 30, hidden: 2816, inter: 2112, heads: 16,
		kvHeads: 8, hdim: 256, vocab: 262144, experts: 128, topK: 8, expertInter: 704,
		extra: map[string]any{"global_head_dim": 512.0, "num_global_key_value_heads": 2.0, "sliding_window": 1024.0, "enable_moe_block": true}},
	"gemma-4-e4b-it-4bit": {modelType: "gemma4", textType: "gemma4_text", layers: 42, hidden: 2560, inter: 10240, heads: 8,
		kvHeads: 2, hdim: 256, vocab: 262144,
		extra: map[string]any{"global_head_dim": 512.0, "hidden_size_per_layer_input": 256.0, "num_kv_shared_layers": 18.0, "sliding_window": 512.0}},
}

// TestPublishedShapes: the profiles written from published configs parse
// and carry those configs' shapes.
func TestPublishedShapes(t *testing.T) {
	for name, want := range published {
		b, err := Config(name)
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]any
		if err := json.Unmarshal(b, &top); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := top
		if want.textType != "" {
			c, _ = top["text_config"].(map[string]any)
			if c == nil || c["model_type"] != want.textType {
				t.Fatalf("%s: text_config %v", name, c["model_type"])
			}
		}
		if top["model_type"] != want.modelType {
			t.Errorf("%s: model_type %v", name, top["model_type"])
		}
		num := func(keys ...string) int {
			for _, k := range keys {
				if f, ok := c[k].(float64); ok {
					return int(f)
				}
			}
			return 0
		}
		for _, f := range []struct {
			got, want int
			what      string
		}{
			{num("num_hidden_layers"), want.layers, "layers"}, {num("hidden_size"), want.hidden, "hidden"},
			{num("intermediate_size"), want.inter, "intermediate"}, {num("num_attention_heads"), want.heads, "heads"},
			{num("num_key_value_heads"), want.kvHeads, "kv heads"}, {num("head_dim"), want.hdim, "head dim"},
			{num("vocab_size"), want.vocab, "vocab"}, {num("num_local_experts", "num_experts"), want.experts, "experts"},
			{num("num_experts_per_tok", "top_k_experts"), want.topK, "top-k"},
			{num("moe_intermediate_size"), want.expertInter, "expert intermediate"},
			{num("shared_expert_intermediate_size"), want.sharedInt, "shared expert intermediate"},
		} {
			if f.got != f.want {
				t.Errorf("%s: %s %d, want %d", name, f.what, f.got, f.want)
			}
		}
		for k, v := range want.extra {
			if c[k] != v {
				t.Errorf("%s: %s = %v, want %v", name, k, c[k], v)
			}
		}
		types, _ := c["layer_types"].([]any)
		if len(types) != want.layers {
			t.Errorf("%s: %d layer_types for %d layers", name, len(types), want.layers)
		}
		for i, typ := range types {
			if want.fullEvery > 0 && (typ == "full_attention") != (i%want.fullEvery == want.fullEvery-1) {
				t.Errorf("%s: layer %d is %v", name, i, typ)
			}
		}
		if _, ok := top["quantization"].(map[string]any); !ok {
			t.Errorf("%s: no quantization block", name)
		}
	}
}
