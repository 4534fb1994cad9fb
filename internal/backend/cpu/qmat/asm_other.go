//go:build !amd64 || purego

package qmat

// Without the assembly kernels every width runs on the Go path.

func asmRows(bits int) []int { return nil }

func (m *Matrix) mulRangeAsm(p *prep, out []float32, o0, o1 int) {
	panic("qmat: assembly kernels not available")
}
