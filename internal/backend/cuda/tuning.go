//go:build linux

package cuda

import "github.com/mlxcel/mlxcel/internal/settings"

// tuning holds decode attention's measured sizes (ops.go explains each
// default and the runs behind it). They are not settings: New sets the
// defaults, and tests and benchmarks set other values on a Backend to
// check or measure them.
type tuning struct {
	decSplitKeys   int // keys per split block (decSplitKeys)
	decWaves       int // blocks an SM at most, splits included (0: decodeWaves)
	decHeads       int // query heads a block at short contexts (0: the whole group)
	decHeadsMaxCtx int // longest (rounded) context that takes decHeads
	decLongHeads   int // query heads a block past decHeadsMaxCtx (-1: longHeads by context, 0: the group)
	decClusterMax  int // the most splits merged in a thread block cluster (0: off, before Hopper)
}

// setDefaults sets what a default run uses; New calls it before the
// device's own limits (clusters, shared memory) trim it, and the host-only
// recording benchmarks call it so they record what a default run launches.
func (b *Backend) setDefaults() {
	b.graphs.init(settings.Get("MLXCEL_CUDA_GRAPHS") != "0")
	b.prof.at = profileAt()
	b.tuning = tuning{
		decSplitKeys:   decSplitKeys,
		decHeads:       decHeadsPerBlock,
		decHeadsMaxCtx: decHeadsMaxCtx,
		decLongHeads:   -1,
		decClusterMax:  16,
	}
}
