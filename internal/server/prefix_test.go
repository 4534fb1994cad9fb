package server

import (
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// metricValue reads one unlabelled sample from /metrics.
func metricValue(t *testing.T, s *testServer, name string) float64 {
	t.Helper()
	resp, err := s.ts.Client().Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Two requests with one long prompt: the second maps the first one's KV,
// and the counters say so; --no-prefix-cache turns that off.
func TestPrefixCacheMetricsAndFlag(t *testing.T) {
	f, err := parseFlags(t, "--no-prefix-cache")
	if err != nil || !f.Options.NoPrefixCache {
		t.Fatalf("--no-prefix-cache: %v %+v", err, f.Options)
	}
	if f, _ := parseFlags(t); f.Options.NoPrefixCache {
		t.Fatal("prefix caching should be on by default")
	}
	l := loadModel(t, "")
	prompt := strings.Repeat("Once upon a time there was a little girl who liked to play in the park. ", 6)
	for _, off := range []bool{false, true} {
		s := startServer(t, l, Options{Parallel: 2, NoPrefixCache: off})
		if s.Engine().PrefixCaching() == off {
			t.Fatalf("engine prefix caching %v with NoPrefixCache %v", s.Engine().PrefixCaching(), off)
		}
		for range 2 {
			code, body := s.post(t, "/v1/completions", map[string]any{"model": "stories260k", "prompt": prompt, "max_tokens": 4})
			if code != 200 {
				t.Fatalf("status %d: %v", code, body)
			}
		}
		hits := metricValue(t, s, "mlxcel_prefix_cache_hit_tokens_total")
		queries := metricValue(t, s, "mlxcel_prefix_cache_query_tokens_total")
		t.Logf("NoPrefixCache %v: %v of %v prompt tokens from the cache", off, hits, queries)
		if off && (hits != 0 || queries != 0) {
			t.Errorf("disabled: hits %v queries %v", hits, queries)
		}
		if !off && (hits < 64 || queries <= hits) {
			t.Errorf("the second request should have mapped the first one's prompt: hits %v of %v", hits, queries)
		}
		s.Close()
	}
}

// A hybrid model (Qwen3.5's recurrent layers) caches prefixes through the
// server too: the second of two identical completions reports the prompt's
// full blocks as cached_tokens (the first one's snapshot is there) and
// returns the same greedy text.
func TestPrefixCacheHybridModel(t *testing.T) {
	l := loadModel(t, fixture("qwen3_5_text-bf16"))
	s := startServer(t, l, Options{Parallel: 2})
	defer s.Close()
	if !s.Engine().PrefixCaching() {
		t.Fatalf("prefix caching off: %s", s.Engine().PrefixCacheOff())
	}
	prompt := strings.Repeat("the quick brown fox jumps over the lazy dog ", 12)
	var texts []string
	var cached []float64
	for range 2 {
		code, body := s.post(t, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 8, "temperature": 0})
		if code != 200 {
			t.Fatalf("status %d: %v", code, body)
		}
		usage := body["usage"].(map[string]any)
		details, _ := usage["prompt_tokens_details"].(map[string]any)
		c, _ := details["cached_tokens"].(float64)
		cached = append(cached, c)
		texts = append(texts, body["choices"].([]any)[0].(map[string]any)["text"].(string))
		if c > 0 {
			bs := float64(s.Engine().Config().BlockSize)
			if want := float64(int((usage["prompt_tokens"].(float64)-1)/bs)) * bs; c != want {
				t.Errorf("cached_tokens %v, want %v (the prompt's full blocks before its last token)", c, want)
			}
		}
	}
	t.Logf("cached_tokens %v, texts %q", cached, texts)
	if cached[0] != 0 || cached[1] == 0 {
		t.Errorf("cached_tokens %v: want none on the first request and the prefix on the second", cached)
	}
	if texts[0] != texts[1] {
		t.Errorf("texts differ: %q then %q", texts[0], texts[1])
	}
	if saved, failed := metricValue(t, s, "mlxcel_prefix_cache_snapshots_total"), metricValue(t, s, "mlxcel_prefix_cache_snapshot_failures_total"); saved != 1 || failed != 0 {
		t.Errorf("/metrics: %v snapshots saved, %v failed; want the first prompt's one, none failed", saved, failed)
	}
}
