package bench

import (
	"context"
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
	defer ts.Close()
	defer s.Close()
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
