package app

import (
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/reasoning"
	"github.com/mlxcel/mlxcel/internal/toolcall"
)

// A Qwen3.5 MoE checkpoint (mlx-lm layout, model_type qwen3_5_moe with a
// text_config) with Qwen's tokenizer files (the Qwen 3 ones: the fixtures
// carry no Qwen3.5 vocabulary): the template in tokenizer_config.json
// renders as transformers does, <|im_end|> stops generation, and the
// model type picks Qwen's think and XML tool-call parsers.
func TestQwen35TemplateAndStops(t *testing.T) {
	dir := linkFixture(t, map[string]string{
		"config.json": "tiny/qwen3_5_moe_text-mlx-q4g64/config.json", "model.safetensors": "tiny/qwen3_5_moe_text-mlx-q4g64/model.safetensors",
		"tokenizer.json": "tokenizers/qwen3/tokenizer.json", "tokenizer_config.json": "tokenizers/qwen3/tokenizer_config.json",
	})
	l, err := Load(Options{ModelDir: dir, Backend: "cpu", Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.Template == nil {
		t.Fatalf("no chat template: %v", l.TemplateErr)
	}
	c := goldenRender(t, "qwen3.jinja", "system")
	got, err := l.Template.Render(c.Messages, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != c.Rendered {
		t.Errorf("render %q, want transformers' %q", got, c.Rendered)
	}
	eot, ok := l.Tokenizer.TokenID("<|im_end|>")
	if !ok {
		t.Fatal("no <|im_end|> in the Qwen vocabulary")
	}
	if !slices.Contains(l.StopIDs, eot) {
		t.Errorf("stop ids %v, want <|im_end|> %d", l.StopIDs, eot)
	}
	mt := l.Model.Cfg.ModelType
	if r := reasoning.Detect("", mt); r != "think" {
		t.Errorf("reasoning parser for %s: %q, want think", mt, r)
	}
	if tc := toolcall.Detect("", mt); tc != "qwen3_coder" {
		t.Errorf("tool-call parser for %s: %q, want qwen3_coder", mt, tc)
	}
}
