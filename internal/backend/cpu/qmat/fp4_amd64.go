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

const haveFP4Dot1 = true
