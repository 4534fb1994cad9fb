//go:build !amd64 || purego

package qmat

func fp4Dot1(x *float32, w *byte, sc *float32, groups int, tab *byte) float32 {
	panic("qmat: fp4Dot1 needs the assembly kernels")
}

func fp4Dot1G16(x *float32, w *byte, sc *float32, blocks int, tab *byte) float32 {
	panic("qmat: fp4Dot1G16 needs the assembly kernels")
}

func fp8Dot1(x *float32, w *byte, sc *float32, groups int, tab *uint32) float32 {
	panic("qmat: fp8Dot1 needs the assembly kernels")
}

const haveFP4Dot1 = false
