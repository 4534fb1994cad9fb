package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/chat"
)

// A Gemma 3 checkpoint as released: the gemma3_text fixture's weights with
// Gemma 3's real tokenizer files (the chat template lives in
// tokenizer_config.json, eos_token is <end_of_turn>). The chat template
// renders Gemma's turns and both <eos> (config) and <end_of_turn>
// (tokenizer) stop generation.
func TestGemma3TemplateAndStops(t *testing.T) {
	const td = "../../../shared/testdata/"
	dir := t.TempDir()
	for dst, src := range map[string]string{
		"config.json": "tiny/gemma3_text-bf16/config.json", "model.safetensors": "tiny/gemma3_text-bf16/model.safetensors",
		"generation_config.json": "tiny/gemma3_text-bf16/generation_config.json",
		"tokenizer.json":         "tokenizers/gemma3/tokenizer.json", "tokenizer_config.json": "tokenizers/gemma3/tokenizer_config.json",
	} {
		abs, err := filepath.Abs(td + src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("fixture missing: %v", err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, dst)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Load(Options{ModelDir: dir, Backend: "cpu", Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.Template == nil {
		t.Fatalf("no chat template: %v", l.TemplateErr)
	}
	// transformers' render of the same template (Gemma has no system
	// role: the template folds it into the first user turn).
	type goldenCase struct {
		Template, Conversation string
		Messages               []chat.Message
		Rendered               string
	}
	var golden struct{ Cases []goldenCase }
	b, err := os.ReadFile(td + "templates/renders.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(golden.Cases, func(c goldenCase) bool {
		return c.Template == "gemma3.jinja" && c.Conversation == "system"
	})
	if i < 0 {
		t.Fatal("no gemma3 system case in renders.golden.json")
	}
	c := golden.Cases[i]
	got, err := l.Template.Render(c.Messages, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != c.Rendered {
		t.Errorf("render %q, want transformers' %q", got, c.Rendered)
	}
	eot, ok := l.Tokenizer.TokenID("<end_of_turn>")
	if !ok {
		t.Fatal("no <end_of_turn> in the Gemma 3 vocabulary")
	}
	if !slices.Contains(l.StopIDs, 1) || !slices.Contains(l.StopIDs, eot) {
		t.Errorf("stop ids %v, want <eos> 1 and <end_of_turn> %d", l.StopIDs, eot)
	}
	if !strings.Contains(l.Model.Cfg.ModelType, "gemma3") {
		t.Errorf("model type %s", l.Model.Cfg.ModelType)
	}
}
