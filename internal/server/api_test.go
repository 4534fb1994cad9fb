package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/defaultmodel"
)

// TestLoading: before Ready, health and the API answer 503 in the error
// shape; after, 200.
func TestLoading(t *testing.T) {
	s := startServer(t, nil, Options{})
	for _, path := range []string{"/health", "/v1/models"} {
		status, body := s.get(t, path)
		if status != http.StatusServiceUnavailable {
			t.Errorf("%s while loading: %d", path, status)
		}
		if e := errorOf(t, body); e["code"] != "model_loading" {
			t.Errorf("%s: %v", path, e)
		}
	}
	status, body := s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`)
	if status != http.StatusServiceUnavailable {
		t.Errorf("chat while loading: %d %v", status, body)
	}
	if err := s.Ready(loadModel(t, "")); err != nil {
		t.Fatal(err)
	}
	status, body = s.get(t, "/health")
	if status != http.StatusOK || body["status"] != "ok" {
		t.Errorf("health after load: %d %v", status, body)
	}
	status, body = s.get(t, "/v1/models")
	data, _ := body["data"].([]any)
	if status != http.StatusOK || len(data) != 1 || data[0].(map[string]any)["id"] != "stories260k" {
		t.Errorf("models: %d %v", status, body)
	}
}

func TestServedModelName(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{ServedModelName: "tiny-story"})
	if status, body := s.post(t, "/v1/completions", `{"model":"tiny-story","prompt":"Once","max_tokens":2}`); status != 200 || body["model"] != "tiny-story" {
		t.Errorf("%d %v", status, body)
	}
	if status, _ := s.post(t, "/v1/completions", `{"model":"stories260k","prompt":"Once","max_tokens":2}`); status != 404 {
		t.Errorf("the directory name still accepted: %d", status)
	}
}

func TestTokenizeRoundTrip(t *testing.T) {
	l := loadModel(t, "")
	s := startServer(t, l, Options{})
	status, body := s.post(t, "/tokenize", `{"content":"Once upon a time","add_special":true}`)
	if status != 200 {
		t.Fatalf("%d %v", status, body)
	}
	want, _ := l.Tokenizer.Encode("Once upon a time", true)
	toks, _ := body["tokens"].([]any)
	if len(toks) != len(want) || toks[0].(float64) != float64(want[0]) {
		t.Fatalf("tokens %v, want %v", toks, want)
	}
	status, body = s.post(t, "/detokenize", map[string]any{"tokens": toks[1:]})
	if status != 200 || body["content"] != "Once upon a time" {
		t.Errorf("detokenize: %d %q", status, body["content"])
	}
	// add_special defaults to false, as in llama-server.
	_, body = s.post(t, "/tokenize", `{"content":"Once upon a time"}`)
	if n := len(body["tokens"].([]any)); n != len(want)-1 {
		t.Errorf("default add_special: %d tokens", n)
	}
	_, body = s.post(t, "/tokenize", `{"content":"Once","with_pieces":true}`)
	if p := body["tokens"].([]any)[0].(map[string]any); p["piece"] == "" || p["id"] == nil {
		t.Errorf("with_pieces: %v", p)
	}
}

// TestStopStrings: a stop string ends the text before it, the finish
// reason is stop, and the timings are still filled in.
func TestStopStrings(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	_, body := s.post(t, "/v1/completions", `{"prompt":"Once upon a time","max_tokens":40,"temperature":0,"ignore_eos":true}`)
	full := body["choices"].([]any)[0].(map[string]any)["text"].(string)
	i := strings.Index(full, " named")
	if i < 0 {
		t.Fatalf("no ' named' in %q", full)
	}
	for _, stream := range []bool{false, true} {
		req := map[string]any{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "ignore_eos": true, "stop": []string{" named", "zzz"}}
		var text, reason string
		if !stream {
			status, body := s.post(t, "/v1/completions", req)
			if status != 200 {
				t.Fatalf("%d %v", status, body)
			}
			ch := body["choices"].([]any)[0].(map[string]any)
			text, reason = ch["text"].(string), ch["finish_reason"].(string)
			tm := body["timings"].(map[string]any)
			if tm["predicted_n"].(float64) == 0 || tm["ttft_ms"].(float64) <= 0 {
				t.Errorf("timings after a stop string: %v", tm)
			}
		} else {
			req["stream"] = true
			text, reason = collectCompletionStream(t, s, req)
		}
		if text != full[:i] || reason != "stop" {
			t.Errorf("stream=%v: %q (%s), want %q", stream, text, reason, full[:i])
		}
	}
	waitFor(t, func() bool { return counterValue(t, s.metrics.requests.WithLabelValues("stop")) == 2 })
}

// TestChatTemplates: the model's template renders the conversation; a
// model with neither template nor the stories tokenizer refuses chat.
func TestChatTemplates(t *testing.T) {
	base := loadModel(t, "")
	tmpl, err := chat.Parse("{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}", "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	withTmpl := *base
	withTmpl.Template = tmpl
	s := startServer(t, &withTmpl, Options{})
	status, body := s.post(t, "/v1/chat/completions", `{"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Once"},{"type":"text","text":"upon"}]}],"max_tokens":2}`)
	if status != 200 {
		t.Fatalf("%d %v", status, body)
	}
	want, _ := base.Tokenizer.Encode("<system>Be brief.\n<user>Once\nupon\n<assistant>", false)
	if got := body["usage"].(map[string]any)["prompt_tokens"].(float64); int(got) != len(want) {
		t.Errorf("prompt tokens %v, want %d (template rendering)", got, len(want))
	}

	// The plain fallback: BOS + contents joined by newlines.
	s2 := startServer(t, base, Options{})
	_, body = s2.post(t, "/v1/chat/completions", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Once"}],"max_tokens":2}`)
	want, _ = base.Tokenizer.Encode("Be brief.\nOnce", false)
	if got := body["usage"].(map[string]any)["prompt_tokens"].(float64); int(got) != len(want)+1 {
		t.Errorf("plain fallback prompt tokens %v, want %d", got, len(want)+1)
	}

	noTmpl := *base
	noTmpl.Dir = t.TempDir() // no stories tokenizer there: not a test model
	s3 := startServer(t, &noTmpl, Options{})
	status, body = s3.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`)
	if status != 400 || !strings.Contains(errorOf(t, body)["message"].(string), "no chat template") {
		t.Errorf("no template: %d %v", status, body)
	}
}

// TestStoriesTokenizerHash pins the hash the plain chat fallback
// recognises to the embedded model's tokenizer.
func TestStoriesTokenizerHash(t *testing.T) {
	dir, err := defaultmodel.Dir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != storiesTokenizerSHA256 {
		t.Errorf("embedded tokenizer hash %s, plainchat.go has %s", got, storiesTokenizerSHA256)
	}
	if !hasStoriesTokenizer(fixture("qwen3-bf16")) {
		t.Error("the tiny fixtures should carry the stories tokenizer")
	}
}

// TestSeed: a seeded sampled request is reproducible, with every sampling
// knob set, and another seed gives another text.
func TestSeed(t *testing.T) {
	s := startServer(t, loadModel(t, ""), Options{})
	req := func(seed int) string {
		status, body := s.post(t, "/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": 40, "ignore_eos": true,
			"temperature": 1.2, "top_p": 0.95, "top_k": 40, "min_p": 0.01, "presence_penalty": 0.5, "frequency_penalty": 0.3,
			"repetition_penalty": 1.1, "seed": seed})
		if status != 200 {
			t.Fatalf("%d %v", status, body)
		}
		return body["choices"].([]any)[0].(map[string]any)["text"].(string)
	}
	a, b, c := req(7), req(7), req(8)
	if a != b {
		t.Errorf("same seed, different texts:\n%q\n%q", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 gave the same text %q", a)
	}
}
