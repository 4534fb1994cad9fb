//go:build amd64 && !purego

package qmat

// The kernels in gemm_amd64.s (see gemm.go).

//go:noescape
func gemm6x16(w *float32, ws int, xt *float32, k int, c *float32, acc int)

//go:noescape
func dequant4(dst *float32, w *byte, sb *float32, groups, group int)

//go:noescape
func dequant8(dst *float32, w *byte, sb *float32, groups, group int)

//go:noescape
func gemmScatter6(c, out *float32, ldo, rows int)

//go:noescape
func xtStrip(dst, x *float32, ldx, k int, tab *int)
