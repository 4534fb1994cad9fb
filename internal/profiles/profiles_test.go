package profiles

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEmbedded(t *testing.T) {
	want := "gemma-4-26b-a4b-it-4bit gemma-4-31b-it-4bit gemma-4-e4b-it-4bit gpt-oss-120b-mxfp4-q8 gpt-oss-20b-mxfp4-q8 " +
		"llama-3.1-8b-4bit mixtral-8x7b-4bit qwen2.5-0.5b-4bit qwen2.5-7b-4bit qwen3-30b-a3b-4bit qwen3.5-27b-4bit qwen3.5-35b-a3b-4bit"
	if got := strings.Join(Names(), " "); got != want {
		t.Fatalf("embedded %q, want %q", got, want)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Chdir(t.TempDir()) // no checkout around: the embedded copy must do
	dir, err := Dir("llama-3.1-8b-4bit")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dir) != "llama-3.1-8b-4bit" {
		t.Errorf("folder %s is not named as the profile", dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ModelType string `json:"model_type"`
		Layers    int    `json:"num_hidden_layers"`
		Hidden    int    `json:"hidden_size"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil || cfg.ModelType != "llama" || cfg.Layers != 32 || cfg.Hidden != 4096 {
		t.Errorf("llama-3.1-8b-4bit: %+v, %v", cfg, err)
	}
	if again, err := Dir("llama-3.1-8b-4bit"); err != nil || again != dir {
		t.Errorf("second Dir: %s, %v", again, err)
	}
	if _, err := Dir("nope"); err == nil || !strings.Contains(err.Error(), "qwen3-30b-a3b-4bit") {
		t.Errorf("unknown profile: %v", err)
	}
}

// The embedded profiles the shared reference data has are copies of it
// (the others are written here from published configs: published_test.go).
func TestMatchesShared(t *testing.T) {
	for _, name := range Names() {
		if published[name] != nil {
			continue
		}
		want, err := os.ReadFile(filepath.Join("../../../shared/testdata/profiles", name, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := Config(name); string(got) != string(want) {
			t.Errorf("%s differs from shared/testdata/profiles", name)
		}
	}
}
