package cpu

import (
	"math"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// TestArgmaxNonFinite: a row holding NaN or +Inf gives NonFiniteRow, so
// broken weights fail the request instead of serving token 0; -Inf is a
// masked logit (logit_bias, constraints), not a failure.
func TestArgmaxNonFinite(t *testing.T) {
	b := New(1)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	rows := [][]float32{{1, 3, 2}, {nan, nan, nan}, {1, nan, 2}, {0, inf, 1}, {-1, -5, float32(math.Inf(-1))}}
	x := b.NewTensor(len(rows), 3)
	var flat []float32
	for _, r := range rows {
		flat = append(flat, r...)
	}
	WriteRows(x, flat)
	got := b.Argmax(x)
	want := []int32{1, backend.NonFiniteRow, backend.NonFiniteRow, backend.NonFiniteRow, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d %v: argmax %d, want %d", i, rows[i], got[i], want[i])
		}
	}
}
