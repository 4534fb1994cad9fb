package cpu

import (
	"math"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// TestGELUExact: the erf GELU at values from tables of the normal CDF
// (x*Phi(x)), and its gap to the tanh form, which a model configured with
// "gelu" must not get.
func TestGELUExact(t *testing.T) {
	g := []float32{-3, -1, -0.5, 0, 0.5, 1, 2, 3}
	// x * Phi(x), Phi from the standard normal table.
	want := []float64{-0.0040496, -0.1586553, -0.1542687, 0, 0.3457313, 0.8413447, 1.9544997, 2.9959504}
	u := []float32{1, 1, 1, 1, 1, 1, 1, 2}
	want[7] *= 2
	d := make([]float32, len(g))
	gatedAct(d, g, u, backend.GELU)
	tanh := make([]float32, len(g))
	gatedAct(tanh, g, u, backend.GELUTanh)
	for i := range g {
		if math.Abs(float64(d[i])-want[i]) > 2e-6 {
			t.Errorf("gelu(%g)*%g = %.7f, want %.7f", g[i], u[i], d[i], want[i])
		}
	}
	if diff := math.Abs(float64(d[0] - tanh[0])); diff < 1e-4 {
		t.Errorf("gelu(-3): erf %g and tanh %g forms too close to tell apart", d[0], tanh[0])
	}
}
