package app

import (
	"slices"
	"strings"
	"testing"
)

// A Gemma 3 checkpoint as released: the gemma3_text fixture's weights with
// Gemma 3's real tokenizer files (the chat template lives in
// tokenizer_config.json, eos_token is <end_of_turn>). The chat template
// renders Gemma's turns and both <eos> (config) and <end_of_turn>
// (tokenizer) stop generation.
func TestGemma3TemplateAndStops(t *testing.T) {
	dir := linkFixture(t, map[string]string{
		"config.json": "tiny/gemma3_text-bf16/config.json", "model.safetensors": "tiny/gemma3_text-bf16/model.safetensors",
		"generation_config.json": "tiny/gemma3_text-bf16/generation_config.json",
		"tokenizer.json":         "tokenizers/gemma3/tokenizer.json", "tokenizer_config.json": "tokenizers/gemma3/tokenizer_config.json",
	})
	l, err := Load(Options{ModelDir: dir, Backend: "cpu", Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.Template == nil {
		t.Fatalf("no chat template: %v", l.TemplateErr)
	}
	// transformers' render of the same template (Gemma has no system
	// role: the template folds it into the first user turn).
	c := goldenRender(t, "gemma3.jinja", "system")
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
