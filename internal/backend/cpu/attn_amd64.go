//go:build amd64 && !purego

package cpu

import "github.com/mlxcel/mlxcel/internal/backend/cpu/qmat"

// The kernels in attn_amd64.s; see attention.go for the layouts.

//go:noescape
func attnScores(qt *float32, d int, kbase *float32, offs *int32, n int, st *float32, vbase *float32)

//go:noescape
func attnSoftmax(st *float32, n int, ml *float32)

//go:noescape
func attnPV(ot *float32, d int, vbase *float32, offs *int32, n int, pt *float32, f *float32)

//go:noescape
func attnPVRows(o *float32, d int, vbase *float32, offs *int32, n int, pt *float32, f *float32)

//go:noescape
func decodeRowsE4M3(dst *float32, src *uint8, offs *int32, rows, d int, scale float32)

//go:noescape
func decodeRowsBF16(dst *float32, src *uint16, offs *int32, rows, d int)

//go:noescape
func siluMul(dst, gate, up *float32, n int)

// useAsm selects the assembly kernels; tests turn it off to compare with
// the Go paths.
var useAsm = qmat.AVX2()
