package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer is a minimal OpenAI-compatible streaming server with a
// Prometheus /metrics endpoint, standing in for any real server.
type fakeServer struct {
	mu        sync.Mutex
	requests  int     // completed streams
	ttftSum   float64 // seconds
	failEvery int     // fail every n-th request with HTTP 500 (0: never)
	seen      atomic.Int64
	apiKey    string
	bodies    []chatRequest
	inflight  atomic.Int64
	peak      atomic.Int64
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/metrics":
		f.mu.Lock()
		defer f.mu.Unlock()
		fmt.Fprintf(w, "# TYPE mlxcel_requests_total counter\nmlxcel_requests_total{status=\"ok\"} %d\n", f.requests)
		fmt.Fprintf(w, "# TYPE mlxcel_running_requests gauge\nmlxcel_running_requests 0\n")
		fmt.Fprintf(w, "# TYPE mlxcel_request_ttft_ms histogram\n")
		fmt.Fprintf(w, "mlxcel_request_ttft_ms_bucket{le=\"0.1\"} %d\n", f.requests)
		fmt.Fprintf(w, "mlxcel_request_ttft_ms_bucket{le=\"+Inf\"} %d\n", f.requests)
		fmt.Fprintf(w, "mlxcel_request_ttft_ms_sum %g\n", f.ttftSum)
		fmt.Fprintf(w, "mlxcel_request_ttft_ms_count %d\n", f.requests)
		fmt.Fprintf(w, "# TYPE other_total counter\nother_total 5\n")
		return
	case "/v1/chat/completions":
	default:
		http.NotFound(w, r)
		return
	}
	n := f.seen.Add(1)
	cur := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		p := f.peak.Load()
		if cur <= p || f.peak.CompareAndSwap(p, cur) {
			break
		}
	}
	if f.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+f.apiKey {
		http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream || !req.StreamOptions.IncludeUsage {
		http.Error(w, "want a streaming request with include_usage", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, req)
	f.mu.Unlock()
	if f.failEvery > 0 && n%int64(f.failEvery) == 0 {
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	start := time.Now()
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	fmt.Fprint(w, ": keep-alive comment\n\n")
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant"}}}})
	time.Sleep(3 * time.Millisecond) // "prefill"
	var ttft float64
	for i := range req.MaxTokens {
		if i == 0 {
			ttft = time.Since(start).Seconds()
		}
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": fmt.Sprintf(" w%d", i)}}}})
		time.Sleep(time.Millisecond)
	}
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "length"}}})
	// Count the request before the stream ends, as a real server records
	// its histograms before the client can see [DONE] and scrape.
	f.mu.Lock()
	f.requests++
	f.ttftSum += ttft
	f.mu.Unlock()
	words := len(strings.Fields(req.Messages[0].Content))
	send(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": words, "completion_tokens": req.MaxTokens}})
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func TestServeAgainstFakeServer(t *testing.T) {
	fake := &fakeServer{apiKey: "k3y"}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	jsonOut, chart := filepath.Join(dir, "serve.json"), filepath.Join(dir, "serve.svg")
	table, err := run(t, "serve", "--url", srv.URL, "--model", "fake", "--concurrency", "1,2,4", "--requests", "6",
		"--prompt-tokens", "120", "--shared-prefix-tokens", "40", "--max-tokens", "10", "--api-key", "k3y",
		"--metrics", "--temperature", "0.8", "--top-p", "0.95", "--out", jsonOut, "--chart", chart)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + table)
	for _, s := range []string{"conc", "TTFT mean", "p99 ms", "out tok/s", "req/s",
		"mlxcel_request_ttft_ms_count", "mlxcel_requests_total{status=\"ok\"}"} {
		if !strings.Contains(table, s) {
			t.Errorf("table lacks %q", s)
		}
	}
	if strings.Contains(table, "mlxcel_running_requests") || strings.Contains(table, "other_total") {
		t.Error("gauges or other prefixes shown as deltas")
	}
	if got := fake.seen.Load(); got != 18 {
		t.Errorf("server saw %d requests, want 18", got)
	}
	if p := fake.peak.Load(); p > 4 {
		t.Errorf("peak concurrency %d > 4", p)
	}
	var rep ServeReport
	b, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Levels) != 3 {
		t.Fatalf("%d levels", len(rep.Levels))
	}
	for _, l := range rep.Levels {
		if l.Requests != 6 || l.Errors != 0 || l.OutputTokens != 60 {
			t.Errorf("level %+v", l)
		}
		if l.TTFTP50 <= 0 || l.TTFTP50 > l.TTFTP99 || l.ITLMean <= 0 || l.OutputTokS <= 0 || l.RequestsPerS <= 0 ||
			l.DecodeTokSMean <= 0 || l.PromptTokensMean <= 0 {
			t.Errorf("implausible level %+v", l)
		}
		// The cross-check kept for our own server, run here on the fake.
		if err := CheckServerCounts(l, ServerTTFTMetric); err != nil {
			t.Error(err)
		}
		if l.Metrics["mlxcel_request_ttft_ms_sum"] <= 0 {
			t.Errorf("ttft sum delta %v", l.Metrics)
		}
	}
	// Every prompt starts with the same shared prefix and then differs.
	fake.mu.Lock()
	bodies := fake.bodies
	fake.mu.Unlock()
	first := strings.Fields(bodies[0].Messages[0].Content)
	prefix := strings.Join(first[:int(40*wordsPerToken)], " ")
	uniq := map[string]bool{}
	for _, bd := range bodies {
		c := bd.Messages[0].Content
		if !strings.HasPrefix(c, prefix) {
			t.Fatalf("prompt without the shared prefix: %.80q", c)
		}
		uniq[c] = true
		if bd.MaxTokens != 10 || !bd.IgnoreEOS || bd.Model != "fake" || bd.Temperature != 0.8 || bd.TopP != 0.95 {
			t.Errorf("request %+v", bd)
		}
	}
	if len(uniq) != len(bodies) {
		t.Errorf("%d distinct prompts of %d", len(uniq), len(bodies))
	}
	svg, err := os.ReadFile(chart)
	if err != nil || !strings.Contains(string(svg), "TTFT") {
		t.Errorf("chart: %v", err)
	}
}

func TestServeErrorsAndCSV(t *testing.T) {
	fake := &fakeServer{failEvery: 3}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "serve.csv")
	table, err := run(t, "serve", "--url", srv.URL+"/v1", "--model", "fake", "--concurrency", "2", "--requests", "6",
		"--prompt-tokens", "30", "--max-tokens", "3", "--out", out)
	if err == nil || !strings.Contains(err.Error(), "2 request(s) failed") {
		t.Errorf("err %v", err)
	}
	if !strings.Contains(table, "HTTP 500") {
		t.Errorf("table does not show the error:\n%s", table)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "concurrency,requests,errors,") || !strings.HasPrefix(lines[1], "2,6,2,") {
		t.Errorf("csv:\n%s", b)
	}
	// No metrics were scraped, so the server cross-check cannot pass.
	if err := CheckServerCounts(LevelResult{Concurrency: 2}, ServerTTFTMetric); err == nil {
		t.Error("cross-check passed without metrics")
	}
}

// --turns: each conversation's later turns send everything so far, the
// answer the server streamed as the assistant's message and a new user
// message; the report splits first-turn and follow-up TTFT.
func TestServeConversations(t *testing.T) {
	fake := &fakeServer{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "serve.csv")
	table, err := run(t, "serve", "--url", srv.URL, "--model", "fake", "--concurrency", "2", "--requests", "2",
		"--prompt-tokens", "40", "--max-tokens", "4", "--turns", "3", "--turn-tokens", "20", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table, "3-turn conversations") {
		t.Errorf("table lacks the turns line:\n%s", table)
	}
	fake.mu.Lock()
	bodies := fake.bodies
	fake.mu.Unlock()
	if len(bodies) != 6 {
		t.Fatalf("server saw %d requests, want 2 conversations of 3 turns", len(bodies))
	}
	byConv := map[string][]chatRequest{}
	for _, b := range bodies {
		byConv[b.Messages[0].Content] = append(byConv[b.Messages[0].Content], b)
	}
	if len(byConv) != 2 {
		t.Fatalf("%d distinct first messages, want 2", len(byConv))
	}
	for _, turns := range byConv {
		for k, b := range turns {
			if len(b.Messages) != 2*k+1 {
				t.Fatalf("turn %d sent %d messages, want %d", k+1, len(b.Messages), 2*k+1)
			}
			for j := 1; j < len(b.Messages); j += 2 {
				if m := b.Messages[j]; m.Role != "assistant" || m.Content != " w0 w1 w2 w3" {
					t.Errorf("turn %d message %d: %+v, want the streamed answer as the assistant's", k+1, j, m)
				}
				if m := b.Messages[j+1]; m.Role != "user" || !strings.HasPrefix(m.Content, fmt.Sprintf("Turn %d of request", (j+1)/2+1)) {
					t.Errorf("turn %d message %d: %+v, want the next user message", k+1, j+1, m)
				}
			}
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	head, row := strings.Split(lines[0], ","), strings.Split(lines[1], ",")
	col := func(name string) string {
		for i, h := range head {
			if h == name {
				return row[i]
			}
		}
		t.Fatalf("csv has no %s column: %s", name, lines[0])
		return ""
	}
	if col("requests") != "6" || col("turns") != "3" || col("ttft_first_turn_mean_ms") == "0.000" || col("ttft_followup_mean_ms") == "0.000" {
		t.Errorf("csv:\n%s", b)
	}
	if _, err := run(t, "serve", "--url", srv.URL, "--model", "fake", "--turns", "-1"); err == nil || !strings.Contains(err.Error(), "--turns") {
		t.Errorf("--turns -1: %v", err)
	}
}

func TestServeTokenizerSizedPrompts(t *testing.T) {
	needTestdata(t)
	enc, err := LoadTokenizer(testdata + "tokenizers/llama3_1")
	if err != nil {
		t.Fatal(err)
	}
	o := ServeOptions{URL: "http://127.0.0.1:1", Concurrency: []int{1}, Requests: 3, PromptTokens: 300,
		SharedPrefixTokens: 100, Turns: 3, TurnTokens: 40, Encoder: enc}
	o.defaults()
	ps, err := buildServePrompts(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ps[0] {
		ids, _ := enc.Encode(c.first, false)
		if len(ids) > 300 || len(ids) < 290 {
			t.Errorf("prompt is %d tokens, want about 300", len(ids))
		}
		if len(c.next) != 2 {
			t.Fatalf("%d later turns, want 2", len(c.next))
		}
		for _, m := range c.next {
			if ids, _ := enc.Encode(m, false); len(ids) > 40 || len(ids) < 35 {
				t.Errorf("a later turn's message is %d tokens, want about 40", len(ids))
			}
		}
	}
}

func TestReadSSE(t *testing.T) {
	in := ": comment\r\ndata: a\r\ndata: b\r\n\r\nevent: x\ndata:c\n\ndata: [DONE]\n"
	var got []string
	if err := readSSE(strings.NewReader(in), func(d []byte) error { got = append(got, string(d)); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "a\nb|c|[DONE]" {
		t.Errorf("events %q", got)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{4, 1, 3, 2}
	for p, want := range map[float64]float64{0: 1, 50: 2.5, 100: 4, 99: 3.97} {
		if got := percentile(xs, p); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("empty")
	}
}

func TestServeCancel(t *testing.T) {
	// A server that never answers: the per-request timeout bounds the run.
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	start := time.Now()
	ls, err := RunServe(context.Background(), ServeOptions{URL: srv.URL, Concurrency: []int{2}, Requests: 2,
		PromptTokens: 10, MaxTokens: 2, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if ls[0].Errors != 2 || time.Since(start) > 5*time.Second {
		t.Errorf("level %+v after %v", ls[0], time.Since(start))
	}
}

// --response-format: json_object, an inline object, @FILE; a value that is
// neither, or an object without a type, is an error naming the flag.
func TestParseResponseFormat(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.json")
	if err := os.WriteFile(file, []byte("{\n  \"type\": \"json_schema\",\n  \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": \"integer\"}}\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want, err string }{
		{"json_object", `{"type":"json_object"}`, ""},
		{`{"type": "text"}`, `{"type":"text"}`, ""},
		{"@" + file, `{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer"}}}`, ""},
		{"yaml", "", "--response-format: not json_object or a JSON object"},
		{`{"json_schema": {}}`, "", `no "type"`},
		{"@" + file + ".missing", "", "--response-format:"},
	} {
		got, err := parseResponseFormat(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one containing %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%q: %s %v, want %s", c.in, got, err, c.want)
		}
	}
}
