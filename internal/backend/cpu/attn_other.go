//go:build !amd64 || purego

package cpu

// Without the assembly kernels the Go paths run.

var useAsm = false

func attnScores(qt *float32, d int, kbase *float32, offs *int32, n int, st *float32, vbase *float32) {
	panic("cpu: no attention kernels")
}

func attnSoftmax(st *float32, n int, ml *float32) {
	panic("cpu: no attention kernels")
}

func attnPV(ot *float32, d int, vbase *float32, offs *int32, n int, pt *float32, f *float32) {
	panic("cpu: no attention kernels")
}

func attnPVRows(o *float32, d int, vbase *float32, offs *int32, n int, pt *float32, f *float32) {
	panic("cpu: no attention kernels")
}

func decodeRowsE4M3(dst *float32, src *uint8, offs *int32, rows, d int, scale float32) {
	panic("cpu: no decode kernels")
}

func decodeRowsBF16(dst *float32, src *uint16, offs *int32, rows, d int) {
	panic("cpu: no decode kernels")
}

func siluMul(dst, gate, up *float32, n int) { panic("cpu: no activation kernels") }
