package cpu

// TEMPORARY: stands in for qmat until it lands (dequantizes at load).

import (
	"encoding/binary"

	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

type shimMatrix struct {
	out, in int
	w       []float32
}

func shimNew(out, in, bits, group int, packed, scales, biases []byte, dt tensor.DType) (*shimMatrix, error) {
	words := make([]uint32, len(packed)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(packed[4*i:])
	}
	sc := make([]float32, out*in/group)
	bi := make([]float32, out*in/group)
	tensor.ToFloat32(sc, scales, dt)
	tensor.ToFloat32(bi, biases, dt)
	w, err := quant.Dequantize(words, sc, bi, out, in, bits, group)
	return &shimMatrix{out, in, w}, err
}

func (m *shimMatrix) MulRange(out, x []float32, rows, o0, o1 int) {
	for r := range rows {
		for o := o0; o < o1; o++ {
			out[r*m.out+o] = dot(x[r*m.in:(r+1)*m.in], m.w[o*m.in:(o+1)*m.in])
		}
	}
}

func (m *shimMatrix) DequantRow(dst []float32, o int) { copy(dst, m.w[o*m.in:(o+1)*m.in]) }
