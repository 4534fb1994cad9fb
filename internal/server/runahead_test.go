package server

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/engine"
)

// --no-run-ahead reaches the engine; by default the engine decides
// (engine.RunAheadAuto: on for backends that queue steps asynchronously,
// so never on the CPU), and /metrics counts the steps run ahead.
func TestNoRunAheadFlag(t *testing.T) {
	f, err := parseFlags(t, "--no-run-ahead")
	if err != nil || !f.Options.NoRunAhead {
		t.Fatalf("--no-run-ahead: %v %+v", err, f.Options)
	}
	if f, _ := parseFlags(t); f.Options.NoRunAhead {
		t.Fatal("run ahead should be left to the engine by default")
	}
	l := loadModel(t, "")
	for _, off := range []bool{false, true} {
		s := startServer(t, l, Options{Parallel: 2, NoRunAhead: off})
		want := engine.RunAheadAuto
		if off {
			want = engine.RunAheadOff
		}
		if got := s.Engine().Config().RunAhead; got != want {
			t.Errorf("NoRunAhead %v: engine RunAhead %v, want %v", off, got, want)
		}
		code, body := s.post(t, "/v1/completions", map[string]any{"model": "stories260k", "prompt": "Once upon", "max_tokens": 6, "temperature": 0})
		if code != 200 {
			t.Fatalf("status %d: %v", code, body)
		}
		// The CPU backend runs steps synchronously: never ahead.
		if v := metricValue(t, s, "mlxcel_engine_run_ahead_steps_total"); v != 0 {
			t.Errorf("NoRunAhead %v on the CPU: %v steps run ahead", off, v)
		}
	}
}
