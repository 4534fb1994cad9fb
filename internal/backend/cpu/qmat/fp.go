package qmat

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/quant"
)

// FPMatrix is a linear weight [Out, In] in one of MLX's floating-point
// modes (mxfp4, nvfp4, mxfp8; package quant): per group w = code*scale,
// uint8 scales, no biases. The packed codes are referenced, not expanded:
// a row is decoded into an In-float buffer through lookup tables (a byte of
// E2M1 codes gives two values, an E4M3 byte one; a scale byte its factor)
// and dotted with every activation row, so the weights are read once per
// call whatever the row count and memory stays at 4 or 8 bits a weight.
// This is the correct kernel first; vector kernels are left for later
// (docs/cpu-backend.md).
type FPMatrix struct {
	Out, In, Bits, Group int
	Mode                 string

	packed   []byte // Out rows of rowBytes
	scales   []byte // Out rows of In/Group
	rowBytes int
	scale    [256]float32    // scale byte -> factor
	pair     [256][2]float32 // 4-bit: byte -> its low and high element
	elem     [256]float32    // 8-bit: byte -> E4M3 value
}

// NewFP wraps packed codes (out*in*bits/8 bytes, little-endian words as in
// the checkpoint) and scales (out*in/group bytes); both are referenced.
func NewFP(mode string, out, in int, packed, scales []byte) (*FPMatrix, error) {
	bits, group, ok := quant.FPParams(mode)
	if !ok {
		return nil, fmt.Errorf("qmat: %q is not a floating-point mode", mode)
	}
	if err := quant.CheckFPShapes(mode, out, in, in*bits/8, in/group); err != nil {
		return nil, err
	}
	m := &FPMatrix{Out: out, In: in, Bits: bits, Group: group, Mode: mode, rowBytes: in * bits / 8}
	if len(packed) != out*m.rowBytes || len(scales) != out*(in/group) {
		return nil, fmt.Errorf("qmat: %s [%d, %d] needs %d packed and %d scale bytes, have %d and %d",
			mode, out, in, out*m.rowBytes, out*(in/group), len(packed), len(scales))
	}
	m.packed, m.scales = packed, scales
	for b := range 256 {
		m.scale[b] = quant.FPScale(mode, uint8(b))
		m.pair[b] = [2]float32{quant.E2M1(uint8(b)), quant.E2M1(uint8(b) >> 4)}
		m.elem[b] = quant.E4M3(uint8(b))
	}
	return m, nil
}

// WeightBytes is what one multiplication reads: codes plus scales.
func (m *FPMatrix) WeightBytes() int64 { return int64(len(m.packed) + len(m.scales)) }

// DequantRow writes row o (In floats) to dst.
func (m *FPMatrix) DequantRow(dst []float32, o int) {
	if o < 0 || o >= m.Out {
		panic(fmt.Sprintf("qmat.FPMatrix.DequantRow: row %d of %d", o, m.Out))
	}
	dst = dst[:m.In]
	row := m.packed[o*m.rowBytes : (o+1)*m.rowBytes]
	gs := m.In / m.Group
	sc := m.scales[o*gs : (o+1)*gs]
	if m.Bits == 8 {
		for g, sb := range sc {
			s := m.scale[sb]
			d, src := dst[g*m.Group:(g+1)*m.Group], row[g*m.Group:(g+1)*m.Group]
			for i, b := range src {
				d[i] = m.elem[b] * s
			}
		}
		return
	}
	half := m.Group / 2
	for g, sb := range sc {
		s := m.scale[sb]
		d, src := dst[g*m.Group:(g+1)*m.Group], row[g*half:(g+1)*half]
		for i, b := range src {
			p := &m.pair[b]
			d[2*i], d[2*i+1] = p[0]*s, p[1]*s
		}
	}
}

// MulRange computes output columns o0..o1 of out = x · Wᵀ for nRows rows
// (out [nRows, Out], x [nRows, In]); buf is scratch of at least In floats.
// Columns outside the range are untouched, so callers may split columns
// over goroutines.
func (m *FPMatrix) MulRange(out, x []float32, nRows, o0, o1 int, buf []float32) {
	if len(x) < nRows*m.In || len(out) < nRows*m.Out || o0 < 0 || o1 > m.Out || len(buf) < m.In {
		panic(fmt.Sprintf("qmat.FPMatrix.MulRange: [%d, %d) of %d for %d rows, x %d, out %d", o0, o1, m.Out, nRows, len(x), len(out)))
	}
	if nRows == 1 {
		m.mulOneRow(out, x, o0, o1)
		return
	}
	w := buf[:m.In]
	for o := o0; o < o1; o++ {
		m.DequantRow(w, o)
		for r := range nRows {
			out[r*m.Out+o] = Dot(x[r*m.In:(r+1)*m.In], w)
		}
	}
}

// mulOneRow is the decode product: per group the codes' dot with x through
// the lookup tables, times the group's scale once, with no row buffer.
func (m *FPMatrix) mulOneRow(out, x []float32, o0, o1 int) {
	gs, G := m.In/m.Group, m.Group
	x = x[:m.In]
	for o := o0; o < o1; o++ {
		row := m.packed[o*m.rowBytes : (o+1)*m.rowBytes]
		sc := m.scales[o*gs : (o+1)*gs]
		var acc float32
		for g, sb := range sc {
			xg := x[g*G : (g+1)*G]
			var s0, s1 float32
			if m.Bits == 8 {
				for i, b := range row[g*G : (g+1)*G] {
					s0 += xg[i] * m.elem[b]
				}
			} else {
				src := row[g*G/2 : (g+1)*G/2]
				xg = xg[:2*len(src)]
				for i, b := range src {
					p := &m.pair[b]
					s0 += xg[2*i] * p[0]
					s1 += xg[2*i+1] * p[1]
				}
			}
			acc += (s0 + s1) * m.scale[sb]
		}
		out[o] = acc
	}
}
