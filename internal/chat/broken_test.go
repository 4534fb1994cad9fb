package chat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTemplateParseErrorAtLoad: a template with a syntax error is an error
// at load naming the template file, distinct from having no template.
func TestTemplateParseErrorAtLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, templateFile)
	if err := os.WriteFile(p, []byte("{% for m in messages %}{{ m.content }"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), p) || errors.Is(err, ErrNoTemplate) {
		t.Fatalf("error %v, want a parse error naming %s", err, p)
	}
	_, err = Load(t.TempDir())
	if !errors.Is(err, ErrNoTemplate) {
		t.Fatalf("an empty directory: %v, want ErrNoTemplate", err)
	}
}

// TestGenerationConfigOutOfRange: sampling defaults no request could send
// are dropped and reported, not kept to fail every request later.
func TestGenerationConfigOutOfRange(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "generation_config.json")
	body := `{"temperature": -5, "top_p": 0, "top_k": -3, "repetition_penalty": 0, "max_new_tokens": 0, "eos_token_id": 2}`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	gc, err := LoadGenerationConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if gc.Temperature != nil || gc.TopP != nil || gc.TopK != nil || gc.RepetitionPenalty != nil || gc.MaxNewTokens != nil {
		t.Errorf("out-of-range values kept: %+v", gc)
	}
	if len(gc.EOSTokenIDs) != 1 || gc.EOSTokenIDs[0] != 2 {
		t.Errorf("eos ids %v, want [2]", gc.EOSTokenIDs)
	}
	all := strings.Join(gc.Ignored, "\n")
	for _, key := range []string{"temperature -5", "top_p 0", "top_k -3", "repetition_penalty 0", "max_new_tokens 0"} {
		if !strings.Contains(all, key) || !strings.Contains(all, p) {
			t.Errorf("Ignored %q should name %q and the file", all, key)
		}
	}
	if err := os.WriteFile(p, []byte(`{"temperature": 0.6, "top_p": 0.95, "top_k": 20}`), 0o644); err != nil {
		t.Fatal(err)
	}
	gc, err = LoadGenerationConfig(dir)
	if err != nil || gc.Temperature == nil || *gc.Temperature != 0.6 || *gc.TopP != 0.95 || *gc.TopK != 20 || len(gc.Ignored) != 0 {
		t.Fatalf("sane values: %+v %v", gc, err)
	}
}
