//go:build linux

package cuda

import (
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
	"github.com/mlxcel/mlxcel/internal/settings"
)

// setDefaults sets what a default run uses; New calls it before the
// device's own limits (clusters, shared memory) trim it, and the host-only
// recording benchmarks call it so they record what a default run launches.
func (b *Backend) setDefaults() {
	b.graphs.init(settings.Get("MLXCEL_CUDA_GRAPHS") != "0")
	b.prof.at = profileAt()
	b.Tuning = plan.DefaultTuning()
}
