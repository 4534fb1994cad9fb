package weights

import (
	"path/filepath"
	"strings"
	"testing"
)

// The fixture's yarn block (transformers 5 layout: rope_theta inside
// rope_parameters, truncate absent so true).
func TestRopeYarnFixture(t *testing.T) {
	c, err := LoadConfig(testdata + "tiny/qwen2_yarn-bf16")
	if err != nil {
		t.Fatal(err)
	}
	r := c.Rope
	if r.Type != "yarn" || r.Factor != 4 || r.OriginalMaxPosition != 64 || r.Theta != 1e6 || !r.Truncate ||
		r.MaxPosition != 256 || r.BetaFast != 0 || r.AttentionFactor != 0 {
		t.Fatalf("yarn rope: %+v", r)
	}
}

func TestRopeYarnKeys(t *testing.T) {
	// gpt-oss's block: every yarn key it uses is read.
	c, err := ParseConfig([]byte(`{"max_position_embeddings":131072,"rope_scaling":{"beta_fast":32.0,"beta_slow":1.0,
		"factor":32.0,"original_max_position_embeddings":4096,"rope_type":"yarn","truncate":false},"rope_theta":150000}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Rope; r.BetaFast != 32 || r.BetaSlow != 1 || r.Truncate || r.Theta != 150000 || r.OriginalMaxPosition != 4096 {
		t.Fatalf("gpt-oss yarn: %+v", r)
	}
	// DeepSeek's: mscale and mscale_all_dim.
	c, err = ParseConfig([]byte(`{"rope_scaling":{"type":"yarn","factor":40,"mscale":0.707,"mscale_all_dim":1.0,
		"original_max_position_embeddings":4096,"beta_fast":32,"beta_slow":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Rope; r.Mscale != 0.707 || r.MscaleAllDim != 1 || r.Factor != 40 {
		t.Fatalf("deepseek yarn: %+v", r)
	}
	// original_max_position_embeddings falls back to the config's own key,
	// then to max_position_embeddings (transformers 5's standardisation).
	c, err = ParseConfig([]byte(`{"max_position_embeddings":8192,"original_max_position_embeddings":2048,
		"rope_scaling":{"rope_type":"yarn","factor":4}}`))
	if err != nil || c.Rope.OriginalMaxPosition != 2048 {
		t.Fatalf("top-level original_max_position_embeddings: %v %+v", err, c.Rope)
	}
	c, err = ParseConfig([]byte(`{"max_position_embeddings":8192,"rope_scaling":{"rope_type":"yarn","factor":4}}`))
	if err != nil || c.Rope.OriginalMaxPosition != 8192 {
		t.Fatalf("max_position_embeddings fallback: %v %+v", err, c.Rope)
	}
}

func TestRopeLongropeDynamic(t *testing.T) {
	c, err := ParseConfig([]byte(`{"max_position_embeddings":131072,"original_max_position_embeddings":4096,
		"rope_scaling":{"type":"longrope","short_factor":[1,1.5],"long_factor":[2,3.5]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Rope; r.Type != "longrope" || len(r.LongFactor) != 2 || r.LongFactor[1] != 3.5 || r.ShortFactor[1] != 1.5 || r.OriginalMaxPosition != 4096 {
		t.Fatalf("longrope: %+v", r)
	}
	c, err = ParseConfig([]byte(`{"rope_scaling":{"type":"dynamic","factor":2}}`))
	if err != nil || c.Rope.Type != "dynamic" || c.Rope.Factor != 2 {
		t.Fatalf("dynamic: %v %+v", err, c.Rope)
	}
}

// Qwen3.5's rope_parameters carry multimodal sections that change nothing
// for text (all three position streams are the token position); its MoE
// config gives no dense intermediate_size.
func TestQwen35ConfigParses(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type":"qwen3_5_moe_text","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
		"vocab_size":512,"num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":32,
		"rope_parameters":{"rope_type":"default","rope_theta":1e7,"partial_rotary_factor":0.25,"mrope_section":[11,11,10],"mrope_interleaved":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if r := c.Rope; r.Type != "default" || r.PartialRotaryFactor != 0.25 || r.Theta != 1e7 {
		t.Errorf("rope %+v", r)
	}
	if _, err := ParseConfig([]byte(`{"rope_parameters":{"rope_type":"yarn","factor":4,"mrope_section":[1]}}`)); err == nil {
		t.Error("mrope sections with yarn were accepted")
	}
}

// A key or value the engine does not understand fails, naming it.
func TestRopeRefusesUnknown(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{`{"rope_scaling":{"rope_type":"yarn","factor":4,"original_max_position_embeddings":64,"mrope_section":[1]}}`, `"mrope_section"`},
		{`{"rope_scaling":{"rope_type":"linear","factor":4,"beta_fast":32}}`, `"beta_fast"`},
		{`{"rope_parameters":{"rope_type":"default","rope_theta":10000,"factor":2}}`, `"factor"`},
		{`{"rope_parameters":{"full_attention":{"rope_type":"default","rope_theta":1e6,"low_freq_factor":1}}}`, `"low_freq_factor"`},
		{`{"rope_scaling":{"rope_type":"yarn","factor":"4","original_max_position_embeddings":64}}`, "factor"},
		{`{"rope_scaling":{"rope_type":"yarn","factor":4,"original_max_position_embeddings":64,"truncate":"no"}}`, "truncate"},
		{`{"rope_scaling":{"rope_type":"yarn","factor":0.5,"original_max_position_embeddings":64}}`, "factor"},
		{`{"rope_scaling":{"rope_type":"longrope","short_factor":[1],"long_factor":[1,2],"original_max_position_embeddings":64}}`, "long_factor"},
		{`{"rope_scaling":{"rope_type":"longrope","short_factor":[1,"x"],"long_factor":[1,2],"original_max_position_embeddings":64}}`, "short_factor"},
		{`{"rope_scaling":{"rope_type":"dynamic"}}`, "factor"},
		{`{"rope_scaling":{"rope_type":7}}`, "rope_type"},
		{`{"rope_scaling":"yarn"}`, "rope_scaling"},
	} {
		_, err := ParseConfig([]byte(tc.cfg))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

// Every config in the shared testdata parses under the strict rope rules
// (fixtures and the profiles of real checkpoints).
func TestSharedConfigsParse(t *testing.T) {
	paths, _ := filepath.Glob(testdata + "tiny/*/config.json")
	more, _ := filepath.Glob(testdata + "profiles/*/config.json")
	paths = append(paths, more...)
	if len(paths) < 20 {
		t.Fatalf("only %d configs under %s", len(paths), testdata)
	}
	for _, p := range paths {
		if _, err := LoadConfig(filepath.Dir(p)); err != nil {
			t.Errorf("%v", err)
		}
	}
}
