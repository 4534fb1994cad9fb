package weights

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// SplitColumns cuts a [rows, cols] weight (dense or quantized) into parts
// [rows, cols/parts] column blocks: Gemma 4 packs every layer's per-layer
// embedding side by side in one table. A quantized block must hold whole
// groups and whole 32-bit words.
func SplitColumns(h *tensor.Host, parts int) ([]*tensor.Host, error) {
	if len(h.Shape) != 2 || parts <= 0 || h.Shape[1]%parts != 0 {
		return nil, fmt.Errorf("%s: shape %v does not split into %d column blocks", h.Name, h.Shape, parts)
	}
	rows, w := h.Shape[0], h.Shape[1]/parts
	if q := h.Quant; q != nil && (q.GroupSize <= 0 || w%q.GroupSize != 0 || w*q.Bits%32 != 0) {
		return nil, fmt.Errorf("%s: column blocks of %d do not hold whole groups of %d (%d bits)", h.Name, w, q.GroupSize, q.Bits)
	}
	cut := func(b []byte, p int) []byte {
		rb := len(b) / rows
		pb := rb / parts
		out := make([]byte, 0, rows*pb)
		for r := range rows {
			out = append(out, b[r*rb+p*pb:r*rb+(p+1)*pb]...)
		}
		return out
	}
	return splitHost(h, parts, []int{rows, w}, cut), nil
}

// SplitRowBlocks cuts a [rows, cols] weight into parts [rows/parts, cols]
// blocks of consecutive rows (Gemma 4's per_layer_model_projection holds
// every layer's projection one after the other).
func SplitRowBlocks(h *tensor.Host, parts int) ([]*tensor.Host, error) {
	if len(h.Shape) != 2 || parts <= 0 || h.Shape[0]%parts != 0 {
		return nil, fmt.Errorf("%s: shape %v does not split into %d row blocks", h.Name, h.Shape, parts)
	}
	cut := func(b []byte, p int) []byte {
		n := len(b) / parts
		return b[p*n : (p+1)*n]
	}
	return splitHost(h, parts, []int{h.Shape[0] / parts, h.Shape[1]}, cut), nil
}

// splitHost applies cut to the data, scales and biases of each part.
func splitHost(h *tensor.Host, parts int, shape []int, cut func(b []byte, p int) []byte) []*tensor.Host {
	out := make([]*tensor.Host, parts)
	for p := range out {
		o := &tensor.Host{Name: h.Name, Shape: shape, DType: h.DType, Data: cut(h.Data, p)}
		if q := h.Quant; q != nil {
			nq := *q
			nq.Scales = cut(q.Scales, p)
			if q.Biases != nil {
				nq.Biases = cut(q.Biases, p)
			}
			o.Quant = &nq
		}
		out[p] = o
	}
	return out
}
