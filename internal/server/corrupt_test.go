package server

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// corruptions break one file of a copy of the embedded model each. want
// is what the load error must name ("" when the model may load, and must
// then serve a completion or fail it with a clear error).
var corruptions = []struct {
	name, file, want string
	edit             func(b []byte) []byte
}{
	{"truncated weights", "model.safetensors", "model.safetensors", func(b []byte) []byte { return b[:len(b)/2] }},
	{"weights header length", "model.safetensors", "model.safetensors", func(b []byte) []byte {
		c := append([]byte(nil), b...)
		c[7] = 0x7f
		return c
	}},
	{"weights header garbage", "model.safetensors", "model.safetensors", func(b []byte) []byte {
		c := append([]byte(nil), b...)
		copy(c[8:], "not json at all")
		return c
	}},
	{"empty weights", "model.safetensors", "model.safetensors", func([]byte) []byte { return nil }},
	{"config not JSON", "config.json", "config.json", func([]byte) []byte { return []byte("{hidden_size") }},
	{"config max_position_embeddings 0", "config.json", "max_position_embeddings", func(b []byte) []byte {
		return regexp.MustCompile(`"max_position_embeddings": *\d+`).ReplaceAll(b, []byte(`"max_position_embeddings": 0`))
	}},
	{"config vocab 10^9", "config.json", "vocab", func(b []byte) []byte {
		return regexp.MustCompile(`"vocab_size": *\d+`).ReplaceAll(b, []byte(`"vocab_size": 1000000000`))
	}},
	{"tokenizer truncated", "tokenizer.json", "tokenizer.json", func(b []byte) []byte { return b[:len(b)/3] }},
	{"tokenizer id 10^9", "tokenizer.json", "1000000000", func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"vocab": {`, `"vocab": {"zzzhuge": 1000000000, `, 1))
	}},
	{"tokenizer_config not JSON", "tokenizer_config.json", "tokenizer_config.json", func([]byte) []byte { return []byte("[") }},
	{"generation_config wrong type", "generation_config.json", "generation_config.json", func([]byte) []byte { return []byte(`{"temperature": "hot"}`) }},
	{"generation_config out of range", "generation_config.json", "", func([]byte) []byte { return []byte(`{"temperature": -5, "top_k": -9}`) }},
	{"template syntax error", "chat_template.jinja", "", func([]byte) []byte { return []byte("{% if %}") }},
}

// TestCorruptModels: every corrupted model fails to load within 5 s with
// bounded memory and an error naming what broke, or loads and serves.
func TestCorruptModels(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(storiesCopy(t, nil), "tokenizer.json"))
	if err != nil || !strings.Contains(string(src), `"vocab": {`) {
		t.Fatalf("the stories tokenizer.json no longer has the spelling this test edits: %v", err)
	}
	var slowest time.Duration
	for _, c := range corruptions {
		dir := storiesCopy(t, nil)
		p := filepath.Join(dir, c.file)
		b, _ := os.ReadFile(p)
		if err := os.WriteFile(p, c.edit(b), 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		l, err := loadDir(t, dir)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		slowest = max(slowest, took)
		if took > 5*time.Second {
			t.Errorf("%s: the load took %v", c.name, took)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
			t.Errorf("%s: the load allocated %d MB", c.name, alloc>>20)
		}
		switch {
		case err != nil && c.want == "":
			t.Errorf("%s: %v, want the model to load", c.name, err)
		case err != nil:
			if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("%s: error %q should be one line naming %q", c.name, msg, c.want)
			}
		case c.want != "":
			t.Errorf("%s: loaded, want an error naming %q", c.name, c.want)
		default:
			s := startServer(t, l, Options{})
			if code, body := s.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":3}`); code != 200 {
				t.Errorf("%s: loaded but a completion got %d %v", c.name, code, body)
			}
		}
	}
	t.Logf("%d corrupted models, slowest load %v", len(corruptions), slowest)
}
