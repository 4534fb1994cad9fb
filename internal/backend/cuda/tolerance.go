//go:build linux

package cuda

// Tolerance reports where this backend is not f32-exact, for the
// conformance suite: Linear over more than gemmRows rows runs through
// cuBLAS in TF32 (10-bit mantissa products, f32 accumulation).
func (b *Backend) Tolerance(op string, rows int) float64 {
	if rows > gemmRows && len(op) >= 6 && op[:6] == "Linear" {
		return 5e-3
	}
	return 0
}
