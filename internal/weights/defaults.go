package weights

// textDefaults are the values transformers' config classes give keys that
// config.json leaves out, for the text model types whose released configs
// rely on them: the multimodal Gemma 3 checkpoints list only what differs
// from Gemma3TextConfig (gemma-3-4b-it gives no vocab_size, head counts or
// activation), so without these a real checkpoint would be misread.
var textDefaults = map[string]map[string]any{
	"gemma3_text": {
		"vocab_size": 262208.0, "hidden_size": 2304.0, "intermediate_size": 9216.0, "num_hidden_layers": 26.0,
		"num_attention_heads": 8.0, "num_key_value_heads": 4.0, "head_dim": 256.0,
		"hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072.0, "rms_norm_eps": 1e-6,
		"rope_theta": 1e6, "rope_local_base_freq": 1e4, "query_pre_attn_scalar": 256.0, "sliding_window": 4096.0,
		"sliding_window_pattern": 6.0, "tie_word_embeddings": true, "bos_token_id": 2.0, "eos_token_id": 1.0,
	},
}

// applyTextDefaults fills raw's missing keys from its text model type's
// defaults ("gemma3" wraps "gemma3_text").
func applyTextDefaults(raw map[string]any) {
	mt, _ := raw["text_model_type"].(string)
	if mt == "" {
		mt, _ = raw["model_type"].(string)
	}
	if mt == "gemma3" {
		mt = "gemma3_text"
	}
	for k, v := range textDefaults[mt] {
		if _, ok := raw[k]; !ok {
			raw[k] = v
		}
	}
}
