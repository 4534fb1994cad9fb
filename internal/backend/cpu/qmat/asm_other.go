//go:build !amd64 || purego

package qmat

// Without the assembly kernels every width runs on the Go path.

func asmRows(bits int) []int { return nil }

func (m *Matrix) mulRangeAsm(p *prep, out []float32, o0, o1 int) {
	panic("qmat: assembly kernels not available")
}

func gemm6x16(w *float32, ws int, xt *float32, k int, c *float32, acc int) {
	panic("qmat: assembly kernels not available")
}

func dequant4(dst *float32, w *byte, sb *float32, groups, group int) {
	panic("qmat: assembly kernels not available")
}

func dequant8(dst *float32, w *byte, sb *float32, groups, group int) {
	panic("qmat: assembly kernels not available")
}

func gemmScatter6(c, out *float32, ldo, rows int) {
	panic("qmat: assembly kernels not available")
}

func xtStrip(dst, x *float32, ldx, k int, tab *int) {
	panic("qmat: assembly kernels not available")
}
