package cpu

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// SampleRows samples each row with backend.HostSample
// (backend.RowSampler): the CPU backend's rows are already on the host,
// so this is internal/sample itself, the reference of the device samplers.
func (b *Backend) SampleRows(t backend.Tensor, rows []backend.SampleRow) ([]backend.Sampled, error) {
	x := t.(*Tensor)
	if len(rows) != x.rows {
		return nil, fmt.Errorf("cpu: SampleRows got %d parameter rows for %d logit rows", len(rows), x.rows)
	}
	out := make([]backend.Sampled, len(rows))
	// Rows are independent (each its own draw): one per worker, as the
	// engine's host path samples requests in parallel.
	b.parallel(len(rows), 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			out[r] = backend.HostSample(x.Row(r), rows[r])
			if rows[r].Allowed != nil && out[r].ID != backend.NonFiniteRow {
				sample.ApplyMask(x.Row(r), rows[r].Allowed) // as the contract says: the row keeps its mask
			}
		}
	})
	return out, nil
}
