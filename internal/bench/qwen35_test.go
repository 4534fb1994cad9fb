package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mlxcel/mlxcel/internal/profiles"
)

// shrunkProfile writes the embedded profile name with its published
// config's keys and structure (text_config, mRoPE rope_parameters, gated
// attention, the layer_types pattern, quantization) at toy widths, under
// the same name in a profiles folder, so `bench decode --profile name`
// runs what the real size would, on a model this machine can build.
func shrunkProfile(t *testing.T, name string, text map[string]any) string {
	t.Helper()
	b, err := profiles.Config(name)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	tc := cfg["text_config"].(map[string]any)
	for k, v := range text {
		tc[k] = v
	}
	layers := int(tc["num_hidden_layers"].(float64))
	tc["layer_types"] = tc["layer_types"].([]any)[:layers]
	dir := t.TempDir()
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The two Qwen3.5 profiles decode on the CPU through `bench decode
// --profile`: hybrid layers (three linear of every four), dense and MoE
// with a shared expert, at toy widths.
func TestDecodeQwen35Profiles(t *testing.T) {
	needTestdata(t)
	small := map[string]any{"vocab_size": 512, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 8,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "linear_num_key_heads": 2,
		"linear_num_value_heads": 6, "linear_key_head_dim": 16, "linear_value_head_dim": 16, "max_position_embeddings": 4096}
	moe := map[string]any{"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64}
	for _, name := range []string{"qwen3.5-27b-4bit", "qwen3.5-35b-a3b-4bit"} {
		t.Run(name, func(t *testing.T) {
			text := map[string]any{}
			for k, v := range small {
				text[k] = float64(v.(int))
			}
			if name == "qwen3.5-35b-a3b-4bit" {
				for k, v := range moe {
					text[k] = float64(v.(int))
				}
			}
			csvPath := filepath.Join(t.TempDir(), "bench.csv")
			if _, err := run(t, "decode", "--profile", name, "--profiles-dir", shrunkProfile(t, name, text), "--tokenizer",
				testdata+"models/stories260k", "--prompt-tokens", "80", "--max-tokens", "2", "--warmup", "0",
				"--backend", "cpu", "--csv", csvPath); err != nil {
				t.Fatal(err)
			}
			r := readRecords(t, csvPath)[0]
			checkOK(t, r, 2)
			if r["model_path"] != "synthetic:"+name || r["prompt_tokens"] != "80" {
				t.Errorf("row %v", r)
			}
		})
	}
}
