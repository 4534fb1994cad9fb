package cpu

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu/qmat"
	"github.com/mlxcel/mlxcel/internal/quant"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// weight is a dense float32 array or one packed matrix per expert (MLX
// affine in q, floating-point modes in fp).
type weight struct {
	shape []int
	dense []float32
	q     []*qmat.Matrix
	fp    []*qmat.FPMatrix
}

func (w *weight) Shape() []int    { return w.shape }
func (w *weight) Quantized() bool { return w.q != nil || w.fp != nil }

func (b *Backend) UploadWeight(h *tensor.Host) (backend.Weight, error) {
	n := 1
	for _, d := range h.Shape {
		n *= d
	}
	w := &weight{shape: append([]int(nil), h.Shape...)}
	if h.Quant == nil {
		w.dense = make([]float32, n)
		if err := tensor.ToFloat32(w.dense, h.Data, h.DType); err != nil {
			return nil, fmt.Errorf("%s: %v", h.Name, err)
		}
		return w, nil
	}
	if len(h.Shape) < 2 || len(h.Shape) > 3 {
		return nil, fmt.Errorf("%s: quantized weight must be 2-D or stacked 3-D, got %v", h.Name, h.Shape)
	}
	experts, out, in := 1, h.Shape[len(h.Shape)-2], h.Shape[len(h.Shape)-1]
	if len(h.Shape) == 3 {
		experts = h.Shape[0]
	}
	q := h.Quant
	if quant.IsFP(q.Mode) {
		return uploadFP(w, h, experts, out, in) // fpmat.go
	}
	if q.Mode != "" && q.Mode != quant.Affine {
		return nil, fmt.Errorf("%s: quantization mode %q is not supported", h.Name, q.Mode)
	}
	wBytes := out * in * q.Bits / 8
	sBytes := out * (in / q.GroupSize) * q.ScaleDType.Size()
	if len(h.Data) != experts*wBytes || len(q.Scales) != experts*sBytes || len(q.Biases) != experts*sBytes {
		return nil, fmt.Errorf("%s: quantized data sizes do not match shape %v at %d bits, group %d", h.Name, h.Shape, q.Bits, q.GroupSize)
	}
	// qmat reads the packed words in place; copy them off the checkpoint's
	// mapping, which the loader unmaps once the model is built.
	packed := append([]byte(nil), h.Data...)
	for e := range experts {
		m, err := qmat.New(out, in, q.Bits, q.GroupSize, packed[e*wBytes:(e+1)*wBytes],
			q.Scales[e*sBytes:(e+1)*sBytes], q.Biases[e*sBytes:(e+1)*sBytes], q.ScaleDType)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", h.Name, err)
		}
		w.q = append(w.q, m)
	}
	return w, nil
}

func (b *Backend) Embed(dst backend.Tensor, table backend.Weight) {
	d, w := dst.(*Tensor), table.(*weight)
	cols := w.shape[1]
	for r, id := range b.step.Tokens {
		if w.q != nil {
			w.q[0].DequantRow(d.Row(r), int(id))
		} else if w.fp != nil {
			w.fp[0].DequantRow(d.Row(r), int(id))
		} else {
			copy(d.Row(r), w.dense[int(id)*cols:(int(id)+1)*cols])
		}
	}
}

func (b *Backend) Linear(dst, x backend.Tensor, wt, bias backend.Weight) {
	d, s, w := dst.(*Tensor), x.(*Tensor), wt.(*weight)
	b.linear(d.d, s.d, s.rows, w, 0)
	if bias != nil {
		bv := bias.(*weight).dense
		for r := range s.rows {
			row := d.Row(r)
			for i := range row {
				row[i] += bv[i]
			}
		}
	}
}

// linear computes out[rows, outDim] = x[rows, in] @ W_e^T for expert e
// (e = 0 for a plain matrix), splitting the output columns over the pool.
func (b *Backend) linear(out, x []float32, rows int, w *weight, e int) {
	outDim, in := w.shape[len(w.shape)-2], w.shape[len(w.shape)-1]
	// Below ~64K multiply-adds (a few microseconds) the hand-off to a
	// helper costs more than it saves.
	threads := b.threads
	if outDim*in*rows < 1<<16 {
		threads = 1
	}
	if w.q != nil {
		b.qmul(w.q[e], out, x, rows, threads)
		return
	}
	if w.fp != nil {
		b.fpmul(w.fp[e], out, x, rows, threads)
		return
	}
	wd := w.dense[e*outDim*in : (e+1)*outDim*in]
	minChunk := outDim
	if threads > 1 {
		minChunk = 16
	}
	b.parallel(outDim, minChunk, func(lo, hi int) {
		for r := range rows {
			xr := x[r*in : (r+1)*in]
			or := out[r*outDim : (r+1)*outDim]
			for o := lo; o < hi; o++ {
				or[o] = qmat.Dot(xr, wd[o*in:(o+1)*in])
			}
		}
	})
}

// qmul runs a quantized matmul on the pool: the activations are repacked
// once, then blocks of output rows are handed out as tasks. Blocks are
// multiples of 16 rows (whole cache lines of out per activation row, so
// workers never write the same line) and about 8 per worker, so a worker
// slowed by another process hands its share to the others.
func (b *Backend) qmul(m *qmat.Matrix, out, x []float32, rows, threads int) {
	if threads <= 1 {
		m.Mul(out, x, rows, 1)
		return
	}
	// One activation row streams a matrix once: below ~64 rows (28 KiB
	// at Qwen's 896 inputs) a task costs more to hand out and to start
	// its memory stream than it computes.
	minBlk := 16
	if rows == 1 {
		minBlk = 64
	}
	blk := max(minBlk, (m.Out/(threads*8)+15)&^15)
	nblk := (m.Out + blk - 1) / blk
	p := m.PrepareWith(x, rows, b.workers().run)
	b.workers().run(nblk, func(t int) { m.MulPrepared(p, out, t*blk, min((t+1)*blk, m.Out)) })
	p.Release()
}
