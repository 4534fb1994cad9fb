//go:build amd64 && !purego

package qmat

// fp4Dot1 is in fp4_amd64.s.
//
//go:noescape
func fp4Dot1(x *float32, w *byte, sc *float32, groups int, tab *byte) float32

const haveFP4Dot1 = true
