//go:build amd64 && !purego

package qmat

// fp4Dot1 is in fp4_amd64.s.
//
//go:noescape
func fp4Dot1(x *float32, w *byte, sc *float32, groups int, tab *byte) float32

// fp4Dot1G16 is fp4Dot1 for nvfp4's groups of 16 (two scales a block).
//
//go:noescape
func fp4Dot1G16(x *float32, w *byte, sc *float32, blocks int, tab *byte) float32

// fp8Dot1 is the one-row mxfp8 kernel (E4M3 elements, groups of 32).
//
//go:noescape
func fp8Dot1(x *float32, w *byte, sc *float32, groups int, tab *uint32) float32

const haveFP4Dot1 = true
