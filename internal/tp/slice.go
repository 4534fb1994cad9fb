package tp

import (
	"fmt"
	"slices"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// Slice cuts rank r's shard of h (t's full tensor, dense or quantized)
// on the host; the loader uploads only the shard. A replicated tensor is
// returned as is. A quantized column split is checked against h's own
// group size and bits (a checkpoint may quantize a module otherwise than
// the config's default says).
func Slice(h *tensor.Host, t *Tensor, r int) (*tensor.Host, error) {
	if t.Axis == Replicated {
		return h, nil
	}
	// Rows cut dimension 0 of any rank (stacked experts [experts, out, in]).
	if !slices.Equal(h.Shape, t.Shape) || len(h.Shape) > 2 && t.Axis != Rows {
		return nil, fmt.Errorf("%s: shape %v, planned %v", h.Name, h.Shape, t.Shape)
	}
	var lo, hi int
	if t.Pieces == nil { // else a row cut of several pieces, below
		lo, hi = t.Range(r)
	}
	rows := h.Shape[0]
	cols := 1
	if len(h.Shape) == 2 {
		cols = h.Shape[1]
	}
	var cut func(b []byte) ([]byte, error)
	switch t.Axis {
	case Rows:
		cut = func(b []byte) ([]byte, error) {
			if len(b)%rows != 0 {
				return nil, fmt.Errorf("%s: %d bytes for %d rows", h.Name, len(b), rows)
			}
			rb := len(b) / rows
			if t.Pieces == nil {
				return b[lo*rb : hi*rb], nil
			}
			var out []byte
			for _, p := range t.Pieces[r] {
				out = append(out, b[p[0]*rb:p[1]*rb]...)
			}
			return out, nil
		}
	case Cols:
		if q := h.Quant; q != nil {
			if err := groupAligned(h.Name, lo, hi, q.GroupSize, q.Bits); err != nil {
				return nil, err
			}
		}
		cut = func(b []byte) ([]byte, error) {
			// Each row's bytes (elements, packed words or per-group
			// scales) cover its columns uniformly: cut at the same
			// fraction of every row.
			rb := len(b) / rows
			if len(b)%rows != 0 || lo*rb%cols != 0 || hi*rb%cols != 0 {
				return nil, fmt.Errorf("%s: columns [%d, %d) of %d do not fall on whole elements", h.Name, lo, hi, cols)
			}
			from, to := lo*rb/cols, hi*rb/cols
			out := make([]byte, 0, rows*(to-from))
			for i := range rows {
				out = append(out, b[i*rb+from:i*rb+to]...)
			}
			return out, nil
		}
	}
	o := &tensor.Host{Name: h.Name, Shape: t.ShardShape(r), DType: h.DType}
	var err error
	if o.Data, err = cut(h.Data); err != nil {
		return nil, err
	}
	if q := h.Quant; q != nil {
		nq := *q
		if nq.Scales, err = cut(q.Scales); err != nil {
			return nil, err
		}
		if q.Biases != nil {
			if nq.Biases, err = cut(q.Biases); err != nil {
				return nil, err
			}
		}
		o.Quant = &nq
	}
	return o, nil
}
