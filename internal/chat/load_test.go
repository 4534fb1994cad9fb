package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const sharedTiny = "../../../shared/testdata/tiny"

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o644))
}

func writeJSON(t *testing.T, dir, name string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	writeFile(t, dir, name, string(b))
}

func renderUser(t *testing.T, tmpl *Template) string {
	t.Helper()
	out, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, true, nil)
	must(t, err)
	return out
}

func TestLoadJinjaFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "chat_template.jinja", "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}")
	// The tokens come from tokenizer_config.json in both spellings; its
	// chat_template field loses to the .jinja file.
	writeJSON(t, dir, "tokenizer_config.json", map[string]any{
		"bos_token":     map[string]any{"__type": "AddedToken", "content": "<s>", "lstrip": false},
		"eos_token":     "</s>",
		"chat_template": "ignored",
	})
	writeFile(t, dir, "additional_chat_templates/tool_use.jinja", "TOOLS {{ messages | length }}")
	tmpl, err := Load(dir)
	must(t, err)
	if got := renderUser(t, tmpl); got != "<s>[user]hi</s>" {
		t.Fatalf("got %q", got)
	}
	if !strings.HasPrefix(tmpl.Source(), "{{ bos_token }}{% for") {
		t.Fatalf("Source() = %q", tmpl.Source())
	}
	tu, ok := tmpl.Named("tool_use")
	if !ok || tu.Name() != "tool_use" {
		t.Fatal("tool_use template missing")
	}
	if got := renderUser(t, tu); got != "TOOLS 1" {
		t.Fatalf("tool_use got %q", got)
	}
	if d, ok := tu.Named("default"); !ok || d != tmpl {
		t.Fatal("named templates should reach each other")
	}
	if !slices.Equal(tmpl.Names(), []string{"default", "tool_use"}) {
		t.Fatalf("names %v", tmpl.Names())
	}
}

func TestLoadTokenizerConfigString(t *testing.T) {
	dir := t.TempDir()
	writeJSON(t, dir, "tokenizer_config.json", map[string]any{
		"bos_token":     "<|begin_of_text|>",
		"eos_token":     map[string]any{"content": "<|eot_id|>"},
		"chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}",
	})
	tmpl, err := Load(dir)
	must(t, err)
	if got := renderUser(t, tmpl); got != "<|begin_of_text|>hi<|eot_id|>" {
		t.Fatalf("got %q", got)
	}
	if _, ok := tmpl.Named("tool_use"); ok {
		t.Fatal("unexpected tool_use template")
	}
	if d, ok := tmpl.Named("default"); !ok || d != tmpl {
		t.Fatal("the single template is the default one")
	}
}

func TestLoadTokenizerConfigList(t *testing.T) {
	dir := t.TempDir()
	writeJSON(t, dir, "tokenizer_config.json", map[string]any{
		"bos_token": "<BOS_TOKEN>",
		"eos_token": nil,
		"chat_template": []map[string]any{
			{"name": "default", "template": "D{{ bos_token }}{{ eos_token is defined }}"},
			{"name": "tool_use", "template": "T{% for t in tools %}{{ t.name }}{% endfor %}"},
			{"name": "rag", "template": "R{{ documents | length }}"},
		},
	})
	tmpl, err := Load(dir)
	must(t, err)
	if got := renderUser(t, tmpl); got != "D<BOS_TOKEN>False" {
		t.Fatalf("default got %q", got)
	}
	tu, ok := tmpl.Named("tool_use")
	if !ok {
		t.Fatal("tool_use missing")
	}
	out, err := tu.Render(nil, false, map[string]any{"tools": []map[string]any{{"name": "a"}, {"name": "b"}}})
	must(t, err)
	if out != "Tab" {
		t.Fatalf("tool_use got %q", out)
	}
	rag, _ := tmpl.Named("rag")
	out, err = rag.Render(nil, false, map[string]any{"documents": []string{"x", "y"}})
	must(t, err)
	if out != "R2" {
		t.Fatalf("rag got %q", out)
	}
	if !slices.Equal(tmpl.Names(), []string{"default", "rag", "tool_use"}) {
		t.Fatalf("names %v", tmpl.Names())
	}
}

func TestLoadProcessorTemplate(t *testing.T) {
	dir := t.TempDir()
	writeJSON(t, dir, "tokenizer_config.json", map[string]any{"bos_token": "<bos>"})
	writeJSON(t, dir, "chat_template.json", map[string]any{"chat_template": "{{ bos_token }}P{{ messages | length }}"})
	tmpl, err := Load(dir)
	must(t, err)
	if got := renderUser(t, tmpl); got != "<bos>P1" {
		t.Fatalf("got %q", got)
	}
	writeFile(t, dir, "chat_template.json", "{")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "chat_template.json") {
		t.Fatalf("want an error naming chat_template.json, got %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name  string
		setup func(dir string)
		want  []string // substrings of the error
	}{
		{"empty dir", func(string) {}, []string{"chat_template.jinja", "tokenizer_config.json"}},
		{"no field", func(dir string) {
			writeJSON(t, dir, "tokenizer_config.json", map[string]any{"eos_token": "</s>"})
		}, []string{"no chat template", "tokenizer_config.json"}},
		{"null field", func(dir string) {
			writeJSON(t, dir, "tokenizer_config.json", map[string]any{"chat_template": nil})
		}, []string{"no chat template"}},
		{"bad jinja file", func(dir string) {
			writeFile(t, dir, "chat_template.jinja", "{% for x in %}")
		}, []string{"chat_template.jinja"}},
		{"bad template in config", func(dir string) {
			writeJSON(t, dir, "tokenizer_config.json", map[string]any{"chat_template": "{{ a +  }}"})
		}, []string{"tokenizer_config.json", `"default"`}},
		{"bad named template", func(dir string) {
			writeJSON(t, dir, "tokenizer_config.json", map[string]any{"chat_template": []map[string]any{
				{"name": "default", "template": "ok"}, {"name": "tool_use", "template": "{% if %}"}}})
		}, []string{"tokenizer_config.json", `"tool_use"`}},
		{"no default", func(dir string) {
			writeJSON(t, dir, "tokenizer_config.json", map[string]any{"chat_template": []map[string]any{
				{"name": "tool_use", "template": "x"}}})
		}, []string{"tokenizer_config.json", "default", "tool_use"}},
		{"wrong type", func(dir string) {
			writeJSON(t, dir, "tokenizer_config.json", map[string]any{"chat_template": 7})
		}, []string{"tokenizer_config.json", "chat_template"}},
		{"malformed config", func(dir string) {
			writeFile(t, dir, "tokenizer_config.json", "{")
		}, []string{"tokenizer_config.json"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(dir)
			_, err := Load(dir)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestLoadSharedTemplate loads a shared template file from a model-style
// directory and checks it against its golden render.
func TestLoadSharedTemplate(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(sharedTemplates, "llama3_1.jinja"))
	must(t, err)
	dir := t.TempDir()
	writeFile(t, dir, "chat_template.jinja", string(b))
	writeJSON(t, dir, "tokenizer_config.json", map[string]any{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})
	tmpl, err := Load(dir)
	must(t, err)
	for _, c := range loadGolden(t, filepath.Join(sharedTemplates, "renders.golden.json")) {
		if c.Template != "llama3_1.jinja" {
			continue
		}
		extra := map[string]any{}
		for k, v := range c.ExtraContext {
			extra[k] = v
		}
		got, err := tmpl.Render(toMessages(t, c.Messages), c.AddGenerationPrompt, extra)
		must(t, err)
		if got != *c.Rendered {
			t.Fatalf("got %q want %q", got, *c.Rendered)
		}
	}
}

func TestLoadGenerationConfigShared(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	cases := []struct {
		dir       string
		eos       []int32
		bos, pad  *int32
		stop      []int32
		tokenizer []int32
	}{
		{"gemma4-bf16", []int32{1}, i32(2), i32(0), []int32{1, 106}, []int32{106}},
		{"llama-bf16", []int32{2}, i32(1), nil, []int32{2}, []int32{2}},
		{"mixtral-bf16", []int32{2}, i32(1), nil, []int32{2}, nil},
		{"qwen2-bf16", nil, nil, nil, []int32{5}, []int32{5}},
		{"qwen3-bf16", nil, nil, nil, nil, nil},
		{"qwen3_moe-bf16", nil, nil, nil, []int32{7, 8}, []int32{7, 8, 7}},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join(sharedTiny, c.dir)
			gc, err := LoadGenerationConfig(dir)
			must(t, err)
			if !slices.Equal(gc.EOSTokenIDs, c.eos) || !eqPtr(gc.BOSTokenID, c.bos) || !eqPtr(gc.PadTokenID, c.pad) {
				t.Fatalf("got eos %v bos %v pad %v", gc.EOSTokenIDs, deref(gc.BOSTokenID), deref(gc.PadTokenID))
			}
			// None of the tiny models set sampling defaults.
			if gc.Temperature != nil || gc.TopP != nil || gc.TopK != nil || gc.DoSample != nil || gc.MaxNewTokens != nil {
				t.Fatalf("unexpected sampling defaults %+v", gc)
			}
			stop, err := StopTokenIDs(dir, c.tokenizer)
			must(t, err)
			if !slices.Equal(stop, c.stop) {
				t.Fatalf("stop ids %v, want %v", stop, c.stop)
			}
		})
	}
	// The quantized copies ship no generation_config.json: zero value.
	gc, err := LoadGenerationConfig(filepath.Join(sharedTiny, "gemma4-mlx-q4g64"))
	must(t, err)
	if gc.EOSTokenIDs != nil || gc.BOSTokenID != nil {
		t.Fatalf("want zero value, got %+v", gc)
	}
}

func eqPtr(a, b *int32) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestLoadGenerationConfigFields(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "generation_config.json", `{
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "pad_token_id": null,
  "do_sample": true, "temperature": 0.6, "top_p": 0.9, "top_k": 20.0,
  "repetition_penalty": 1.05, "max_new_tokens": 512, "max_length": 4096,
  "transformers_version": "4.45.0"}`)
	writeFile(t, dir, "config.json", `{"eos_token_id": 128001, "text_config": {"eos_token_id": [128009, 106]}}`)
	gc, err := LoadGenerationConfig(dir)
	must(t, err)
	if !slices.Equal(gc.EOSTokenIDs, []int32{128001, 128008, 128009}) || *gc.BOSTokenID != 128000 || gc.PadTokenID != nil {
		t.Fatalf("ids: %+v", gc)
	}
	if *gc.Temperature != 0.6 || *gc.TopP != 0.9 || *gc.TopK != 20 || *gc.RepetitionPenalty != 1.05 ||
		!*gc.DoSample || *gc.MaxNewTokens != 512 || *gc.MaxLength != 4096 {
		t.Fatalf("sampling: %+v", gc)
	}
	stop, err := StopTokenIDs(dir, []int32{128009, 2})
	must(t, err)
	if want := []int32{128001, 128008, 128009, 106, 2}; !slices.Equal(stop, want) {
		t.Fatalf("stop %v want %v", stop, want)
	}
}

func TestGenerationConfigErrors(t *testing.T) {
	for name, body := range map[string]string{
		"syntax":     `{`,
		"eos string": `{"eos_token_id": "2"}`,
		"eos float":  `{"eos_token_id": 2.5}`,
		"negative":   `{"bos_token_id": -1}`,
		"top_k frac": `{"top_k": 2.5}`,
		"do_sample":  `{"do_sample": "yes"}`,
		"temp":       `{"temperature": "hot"}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "generation_config.json", body)
			_, err := LoadGenerationConfig(dir)
			if err == nil || !strings.Contains(err.Error(), "generation_config.json") {
				t.Fatalf("want an error naming the file, got %v", err)
			}
			if _, err := StopTokenIDs(dir, nil); err == nil {
				t.Fatal("StopTokenIDs should fail too")
			}
		})
	}
	dir := t.TempDir()
	writeFile(t, dir, "config.json", `{"text_config": {"eos_token_id": "x"}}`)
	if _, err := StopTokenIDs(dir, nil); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("want a config.json error, got %v", err)
	}
	if _, err := LoadGenerationConfig(filepath.Join(dir, "missing")); err != nil {
		t.Fatalf("missing dir: %v", err)
	}
	writeFile(t, dir, "sub/generation_config.json/x", "")
	if _, err := LoadGenerationConfig(filepath.Join(dir, "sub")); err == nil {
		t.Fatal("a directory in place of the file should fail")
	}
}
