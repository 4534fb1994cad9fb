package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/server"
)

// The load generator against our own server (stories260k on the CPU):
// every level's completed requests must equal the growth of the server's
// time-to-first-token histogram count, and its token counters must agree
// with the usage the streams reported.
func TestServeAgainstMlxcelServer(t *testing.T) {
	ts := storiesServer(t)
	enc, err := LoadTokenizer(testdata + "models/stories260k")
	if err != nil {
		t.Fatal(err)
	}
	// No model name: the load generator asks /v1/models.
	levels, err := RunServe(context.Background(), ServeOptions{URL: ts.URL, Concurrency: []int{1, 4},
		Requests: 6, PromptTokens: 80, SharedPrefixTokens: 40, MaxTokens: 16, IgnoreEOS: true, Metrics: true, Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	PrintServeTable(&table, levels)
	t.Log("\n" + table.String())
	for _, lv := range levels {
		if lv.Errors > 0 {
			t.Fatalf("level %d: %v", lv.Concurrency, lv.ErrorSamples)
		}
		if err := CheckServerCounts(lv, ServerTTFTMetric); err != nil {
			t.Error(err)
		}
		if lv.OutputTokens != lv.Requests*16 {
			t.Errorf("level %d: %d output tokens, want %d", lv.Concurrency, lv.OutputTokens, lv.Requests*16)
		}
		if gen, ok := lv.Metrics.seriesSum("mlxcel_generation_tokens_total"); !ok || int(gen) != lv.OutputTokens {
			t.Errorf("level %d: server counted %v generated tokens (exported: %v), the streams %d", lv.Concurrency, gen, ok, lv.OutputTokens)
		}
		prompt := int(lv.PromptTokensMean*float64(lv.Requests) + 0.5)
		if got, ok := lv.Metrics.seriesSum("mlxcel_prompt_tokens_total"); !ok || int(got) != prompt {
			t.Errorf("level %d: server counted %v prompt tokens (exported: %v), usage said %d", lv.Concurrency, got, ok, prompt)
		}
	}
}

// A constrained-decoding level against our own server: every request
// carries a json_schema response_format (an array of 24 to 40 integers,
// so the grammar ends the answer well inside max_tokens) and none fails;
// the same body sent once without streaming answers with that array.
func TestServeResponseFormatAgainstMlxcelServer(t *testing.T) {
	ts := storiesServer(t)
	format, err := parseResponseFormat(`{"type": "json_schema", "json_schema": {"name": "ints", "strict": true,
		"schema": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "minItems": 24, "maxItems": 40}}}`)
	if err != nil {
		t.Fatal(err)
	}
	levels, err := RunServe(context.Background(), ServeOptions{URL: ts.URL, Concurrency: []int{4}, Requests: 4, PromptTokens: 40,
		MaxTokens: 400, ResponseFormat: format})
	if err != nil {
		t.Fatal(err)
	}
	lv := levels[0]
	if lv.Errors > 0 {
		t.Fatalf("%d errors: %v", lv.Errors, lv.ErrorSamples)
	}
	// 24 items need at least 48 tokens (an item and a separator each).
	if lv.OutputTokens < lv.Requests*48 {
		t.Errorf("%d output tokens over %d requests: the schema's 24 items need more", lv.OutputTokens, lv.Requests)
	}
	body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": "Numbers:"}},
		"max_tokens": 400, "response_format": format})
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("HTTP %d: %v %+v", resp.StatusCode, err, out)
	}
	var ints []int
	if err := json.Unmarshal([]byte(out.Choices[0].Message.Content), &ints); err != nil || len(ints) < 24 || len(ints) > 40 {
		t.Fatalf("answer %q: %v (%d items)", out.Choices[0].Message.Content, err, len(ints))
	}
	for _, v := range ints {
		if v < 0 || v > 99 {
			t.Fatalf("answer %q: %d outside 0..99", out.Choices[0].Message.Content, v)
		}
	}
}

// storiesServer serves stories260k on the CPU (4 slots) until the test ends.
// Two-turn conversations against our own server: the second turns find
// their first turn's prompt in the prefix cache (the server's hit counter
// grows by at least a block a conversation), and every turn is answered.
func TestServeConversationsAgainstMlxcelServer(t *testing.T) {
	ts := storiesServer(t)
	enc, err := LoadTokenizer(testdata + "models/stories260k")
	if err != nil {
		t.Fatal(err)
	}
	levels, err := RunServe(context.Background(), ServeOptions{URL: ts.URL, Concurrency: []int{2}, Requests: 4, PromptTokens: 96,
		MaxTokens: 8, IgnoreEOS: true, Turns: 2, TurnTokens: 24, Metrics: true, Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	lv := levels[0]
	var table strings.Builder
	PrintServeTable(&table, levels)
	t.Log("\n" + table.String())
	if lv.Errors > 0 || lv.Requests != 8 || lv.OutputTokens != 64 {
		t.Fatalf("level %+v", lv)
	}
	hits, ok := lv.Metrics.seriesSum("mlxcel_prefix_cache_hit_tokens_total")
	if !ok || hits < 4*16 {
		t.Errorf("%v prefix-cache hit tokens (exported: %v): want at least a 16-token block for each of the 4 follow-up turns", hits, ok)
	}
	if lv.TTFTFirstMean <= 0 || lv.TTFTFollowupMean <= 0 {
		t.Errorf("TTFT first turns %v ms, follow-ups %v ms", lv.TTFTFirstMean, lv.TTFTFollowupMean)
	}
}

func storiesServer(t *testing.T) *httptest.Server {
	t.Helper()
	needTestdata(t)
	l, err := app.Load(app.Options{ModelDir: testdata + "models/stories260k", Backend: "cpu", Threads: 2, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	s := server.New(server.Options{Parallel: 4})
	if err := s.Ready(l); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	return ts
}
