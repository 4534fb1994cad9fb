package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/defaultmodel"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// storiesCopy is a writable copy of the embedded model's directory with
// the given files added or replaced ("" content: a FIFO).
func storiesCopy(t testing.TB, files map[string]string) string {
	t.Helper()
	src, err := defaultmodel.Dir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.Remove(p)
		if body == "" {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func loadDir(t testing.TB, dir string) (*app.Loaded, error) {
	t.Helper()
	l, err := app.Load(app.Options{ModelDir: dir, Backend: "cpu", Threads: 2, Quiet: true})
	if err == nil {
		t.Cleanup(func() { l.Model.Backend().Close() })
	}
	return l, err
}

// TestBrokenTemplateAtLoad: a template with a syntax error is reported at
// load naming its file; completions are served, chat requests get a 400
// naming the template error (never "has no chat template").
func TestBrokenTemplateAtLoad(t *testing.T) {
	dir := storiesCopy(t, map[string]string{"chat_template.jinja": "{% for m in messages %}{{ m.content }"})
	l, err := loadDir(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	tmplPath := filepath.Join(dir, "chat_template.jinja")
	if l.TemplateErr == nil || !strings.Contains(l.TemplateErr.Error(), tmplPath) {
		t.Fatalf("TemplateErr %v, want one naming %s", l.TemplateErr, tmplPath)
	}
	var logs syncBuffer
	s := startServer(t, l, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(logs.String(), "chat_template.jinja") {
		t.Errorf("the template error was not logged at load: %s", logs.String())
	}
	if code, body := s.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":2}`); code != 200 {
		t.Fatalf("completion with a broken template: %d %v", code, body)
	}
	code, body := s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	msg, _ := errorOf(t, body)["message"].(string)
	if code != 400 || !strings.Contains(msg, "chat_template.jinja") || strings.Contains(msg, "no chat template") {
		t.Fatalf("chat with a broken template: %d %q", code, msg)
	}
}

// TestTemplateRenderError: a template that fails while rendering (not by
// raise_exception) is a 400 with its message, not a 500 SDKs would retry.
func TestTemplateRenderError(t *testing.T) {
	base := loadModel(t, "")
	tmpl, err := chat.Parse("{% for m in messages %}{{ m.missing.lstrip() }}{% endfor %}", "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	l := *base
	l.Template = tmpl
	s := startServer(t, &l, Options{})
	code, body := s.post(t, "/v1/chat/completions",
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	msg, _ := errorOf(t, body)["message"].(string)
	if code != 400 || !strings.Contains(msg, "template") {
		t.Fatalf("render failure: %d %q, want 400 naming the template", code, msg)
	}
}

// TestGenerationConfigOutOfRangeIgnored: generation_config's temperature
// -5 is reported at load and ignored, so a request that omits
// temperature is served instead of refused for a value it never sent.
func TestGenerationConfigOutOfRangeIgnored(t *testing.T) {
	dir := storiesCopy(t, map[string]string{"generation_config.json": `{"temperature": -5, "top_p": 0.9}`})
	l, err := loadDir(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(l.Warnings, "\n"); !strings.Contains(w, "temperature -5") || !strings.Contains(w, "generation_config.json") {
		t.Errorf("warnings %q should report the temperature", w)
	}
	s := startServer(t, l, Options{})
	if code, body := s.post(t, "/v1/completions", `{"prompt":"Once","max_tokens":2}`); code != 200 {
		t.Fatalf("a request without temperature: %d %v", code, body)
	}
}

// TestFIFOModelFailsFast: a FIFO among the model's files fails the load
// at once with the file's name, instead of leaving /health at 503 for
// ever.
func TestFIFOModelFailsFast(t *testing.T) {
	for _, name := range []string{"model.safetensors", "tokenizer_config.json", "generation_config.json"} {
		dir := storiesCopy(t, map[string]string{name: ""})
		done := make(chan error, 1)
		go func() { _, err := loadDir(t, dir); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, name)) {
				t.Errorf("%s as a FIFO: %v, want an error naming it", name, err)
			}
		case <-time.After(5 * time.Second):
			f, _ := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY, 0)
			f.Close()
			t.Fatalf("%s as a FIFO: the load hangs", name)
		}
	}
}

// TestCancelledLogged499: a request whose client goes away before the
// answer is logged with status 499, not 0.
func TestCancelledLogged499(t *testing.T) {
	var logs syncBuffer
	s := startServer(t, loadModel(t, ""), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := newPost(ctx, s.url+"/v1/completions", `{"prompt":"Once","max_tokens":400,"ignore_eos":true}`)
	go func() {
		waitFor(t, func() bool { return s.Engine().Stats().Running == 1 })
		cancel()
	}()
	if resp, err := s.ts.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the request finished before it was cancelled")
	}
	waitFor(t, func() bool { return strings.Contains(logs.String(), "path=/v1/completions status=499") })
}

// nanWeights rewrites every float tensor of dir's model.safetensors as NaN.
func nanWeights(t testing.TB, dir string) {
	t.Helper()
	p := filepath.Join(dir, "model.safetensors")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	infos, start, _, err := weights.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	nan := map[tensor.DType][]byte{tensor.F32: {0x00, 0x00, 0xc0, 0x7f}, tensor.BF16: {0xc0, 0x7f}, tensor.F16: {0x00, 0x7e}}
	for _, in := range infos {
		pat, ok := nan[in.DType]
		if !ok {
			continue
		}
		for i := start + in.Begin; i < start+in.End; i += int64(len(pat)) {
			copy(b[i:], pat)
		}
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNaNWeightsFail: a model whose weights are all NaN fails each
// request with a clear error and counts it, greedy (the argmax path) or
// sampled, instead of serving tokens with a 200.
func TestNaNWeightsFail(t *testing.T) {
	dir := storiesCopy(t, nil)
	nanWeights(t, dir)
	l, err := loadDir(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, l, Options{})
	for i, body := range []string{`{"prompt":"Once","max_tokens":4,"temperature":0}`, `{"prompt":"Once","max_tokens":4}`,
		`{"prompt":"Once","max_tokens":4,"stream":true}`} {
		code, got := s.postRaw(t, "/v1/completions", body)
		if !strings.Contains(got, "non-finite logits") || (i < 2 && code != 500) {
			t.Errorf("%s: %d %.300s, want the non-finite logits error", body, code, got)
		}
	}
	if n := counterValue(t, s.metrics.nonFinite); n != 3 {
		t.Errorf("mlxcel_nonfinite_logits_total %v, want 3", n)
	}
}
