package bench

import (
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/memplan"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Estimate predicts the memory a run needs before any weight is built, so
// a profile that cannot fit becomes a SKIP:oom_estimate row instead of an
// out-of-memory kill halfway through a ladder (internal/memplan).
type Estimate = memplan.Estimate

func gib(n int64) string { return memplan.GiB(n) }

func estimate(cfg *weights.Config, be backend.Backend, storedBytes int64, chunk int) Estimate {
	return memplan.New(cfg, be, storedBytes, chunk)
}

func checkpointBytes(dir string) int64 { return memplan.CheckpointBytes(dir) }
