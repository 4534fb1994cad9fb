package server

import (
	"testing"
	"time"
)

// A request's steps land in the step histograms by kind: its prefill as
// a prefill step, its decodes as decode steps; the batch-size histogram
// counts every step. --max-batched-tokens and --itl-target reach the engine.
func TestStepMetricsByKind(t *testing.T) {
	f, err := parseFlags(t, "--max-batched-tokens", "300", "--parallel", "4")
	if err != nil || f.Options.MaxBatchedTokens != 300 {
		t.Fatalf("--max-batched-tokens: %v %+v", err, f.Options)
	}
	l := loadModel(t, "")
	s := startServer(t, l, Options{Parallel: 2, MaxBatchedTokens: 300, ITLTarget: 80 * time.Millisecond})
	defer s.Close()
	code, body := s.post(t, "/v1/completions", map[string]any{"model": "stories260k", "prompt": "Once upon a time", "max_tokens": 6, "temperature": 0})
	if code != 200 {
		t.Fatalf("status %d: %v", code, body)
	}
	count := func(kind string) float64 {
		return metricValue(t, s, `mlxcel_engine_step_duration_seconds_count\{kind="`+kind+`"\}`)
	}
	decode, prefill, mixed := count("decode"), count("prefill"), count("mixed")
	steps := metricValue(t, s, "mlxcel_engine_steps_total")
	seqs := metricValue(t, s, "mlxcel_engine_step_sequences_count")
	t.Logf("steps %v: decode %v, prefill %v, mixed %v; batch-size samples %v", steps, decode, prefill, mixed, seqs)
	if prefill < 1 || decode < 4 || mixed != 0 || decode+prefill != steps || seqs != steps {
		t.Errorf("one request of 6 tokens: decode %v prefill %v mixed %v steps %v batch-size samples %v", decode, prefill, mixed, steps, seqs)
	}
	if got := s.Engine().Config(); got.MixedBatchTokens != 300 || got.ITLTarget != 80*time.Millisecond {
		t.Errorf("engine MixedBatchTokens %d, ITLTarget %v; want 300, 80ms", got.MixedBatchTokens, got.ITLTarget)
	}
}
