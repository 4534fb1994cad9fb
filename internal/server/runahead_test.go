package server

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/engine"
)

// --no-run-ahead reaches the engine; by default the engine decides
// (engine.RunAheadAuto: on for backends that queue steps asynchronously).
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
	}
}
