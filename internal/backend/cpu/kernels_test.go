package cpu

import (
	"math"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// TestSiLUKernel: the vector SiLU (its exp is a polynomial) against
// float64 over the whole useful range, extremes included, with a tail
// that is not a multiple of 8.
func TestSiLUKernel(t *testing.T) {
	if !useAsm {
		t.Skip("no assembly kernels")
	}
	const n = 20003
	g, u, d := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range g {
		g[i] = float32(-120 + 240*float64(i)/n)
		u[i] = float32(1 + i%5)
	}
	g[0], g[1] = -1e30, 1e30
	gatedAct(d, g, u, backend.SiLU)
	worst := 0.0
	for i, x := range g {
		x64 := float64(x)
		want := x64 / (1 + math.Exp(-x64)) * float64(u[i])
		err := math.Abs(float64(d[i])-want) / max(math.Abs(want), 1e-20)
		if want == 0 || math.IsInf(want, 0) || math.IsNaN(want) {
			err = math.Abs(float64(d[i]) - want)
			if math.Abs(x64) > 1e29 {
				continue // 1e30/(1+0): only finite inputs matter
			}
		}
		worst = max(worst, err)
		if err > 1e-6 {
			t.Fatalf("silu(%g)*%g = %g, want %g", x, u[i], d[i], want)
		}
	}
	t.Logf("max relative error %.2g", worst)
}
