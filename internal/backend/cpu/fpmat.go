package cpu

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend/cpu/qmat"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// uploadFP keeps a weight in one of MLX's floating-point modes packed
// (qmat.FPMatrix per expert), copied off the checkpoint's mapping.
func uploadFP(w *weight, h *tensor.Host, experts, out, in int) (*weight, error) {
	q := h.Quant
	if q.ScaleDType != tensor.U8 || q.Biases != nil {
		return nil, fmt.Errorf("%s: %s weights need uint8 scales and no biases", h.Name, q.Mode)
	}
	wBytes, sBytes := out*in*q.Bits/8, out*(in/max(q.GroupSize, 1))
	if len(h.Data) != experts*wBytes || len(q.Scales) != experts*sBytes {
		return nil, fmt.Errorf("%s: %s data sizes do not match shape %v", h.Name, q.Mode, h.Shape)
	}
	packed := append([]byte(nil), h.Data...)
	scales := append([]byte(nil), q.Scales...)
	for e := range experts {
		m, err := qmat.NewFP(q.Mode, out, in, packed[e*wBytes:(e+1)*wBytes], scales[e*sBytes:(e+1)*sBytes])
		if err != nil {
			return nil, fmt.Errorf("%s: %v", h.Name, err)
		}
		w.fp = append(w.fp, m)
	}
	return w, nil
}

// fpmul runs an FPMatrix product with the activations packed once and
// output rows split over the pool in blocks of 16 (whole cache lines of
// out per activation row); tasks decode or convert their own rows.
func (b *Backend) fpmul(m *qmat.FPMatrix, out, x []float32, rows, threads int) {
	if threads <= 1 {
		p := m.PrepareWith(x, rows, nil)
		m.MulPrepared(p, out, 0, m.Out)
		p.Release()
		return
	}
	blk := max(16, (m.Out/(threads*8)+15)&^15)
	if rows == 1 {
		blk = max(64, blk)
	}
	nblk := (m.Out + blk - 1) / blk
	p := m.PrepareWith(x, rows, b.workers().run)
	b.workers().run(nblk, func(t int) { m.MulPrepared(p, out, t*blk, min((t+1)*blk, m.Out)) })
	p.Release()
}
