package qmat

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// The assembly path of FPMatrix. An E2M1 value times its scale s is
// exactly an 8-bit affine code: v*s = (s/2)*(2v+12) - 6s with 2v+12 in
// 0..24, and s/2, -6s exact in f32. So each task's block of mxfp4 rows is
// converted on the fly, per call, into a transient 8-bit affine Matrix
// (group 32, f32 scales and biases; rowBase makes it stand for rows
// o0..o1) and run through the affine kernels (mulRangeAsm: the few-row
// kernels, or from 64 rows the gemm micro-kernel), over
// activations packed once per call. The decoded values are exact, so only
// the summation order differs from a dense product. The weights stay
// 4-bit in memory; the conversion is one pass over a block's codes. nvfp4
// (groups of 16) and mxfp8 (E4M3 is not affine) keep the Go path for 2+
// rows. One row of mxfp4 or nvfp4 goes through fp4Dot1 / fp4Dot1G16
// (fp4_amd64.s), which decode the codes in registers.

// FPPrep is one call's activation state for MulPrepared.
type FPPrep struct {
	x     []float32
	nRows int
	p     *prep     // the 8-bit kernels' panel (asmPath), nil otherwise
	xp    []float32 // one E2M1 row: x evens-then-odds per 32 (fp4Dot1)
	x8    bool      // one E4M3 row through fp8Dot1
}

// Release returns the panel to its pool.
func (p *FPPrep) Release() {
	if p.p != nil {
		p.p.release()
	}
}

// asmPath reports whether products take the converted affine path.
func (m *FPMatrix) asmPath() bool {
	return useAsm && m.Mode == quant.MXFP4 && m.In%32 == 0
}

// shape8 is the 8-bit group-32 affine shape of m, for the panel layout.
func (m *FPMatrix) shape8() *Matrix {
	return &Matrix{Out: m.Out, In: m.In, Bits: 8, Group: 32, groups: m.In / 32, gpad: (m.In/32 + 7) &^ 7,
		rowBytes: m.In, es: 4, metaType: tensor.F32}
}

// PrepareWith packs x once for every MulPrepared of this call; par runs
// independent parts in parallel (nil: here).
func (m *FPMatrix) PrepareWith(x []float32, nRows int, par func(n int, f func(i int))) *FPPrep {
	fp := &FPPrep{x: x, nRows: nRows}
	// One row: converting costs what the Go lookup loop does (measured
	// equal); fp4Dot1 decodes in registers instead.
	if m.asmPath() && nRows > 1 {
		fp.p = m.shape8().prepare(x, nRows, par)
	}
	if useAsm && m.Bits == 8 && nRows == 1 && haveFP4Dot1 {
		fp.x8 = true // fp8Dot1 reads x as it is
	}
	if useAsm && m.Bits == 4 && nRows == 1 && haveFP4Dot1 && m.In%32 == 0 {
		fp.xp = make([]float32, m.In)
		for g := 0; g < m.In; g += 32 {
			for i := range 16 {
				fp.xp[g+i], fp.xp[g+16+i] = x[g+2*i], x[g+2*i+1]
			}
		}
	}
	return fp
}

var convPool = sync.Pool{New: func() any { return new(convScratch) }}

type convScratch struct{ packed, meta []byte }

// MulPrepared computes output columns [o0, o1) of out for p's rows.
func (m *FPMatrix) MulPrepared(p *FPPrep, out []float32, o0, o1 int) {
	if p.xp != nil || p.x8 {
		m.mulOneRowAsm(p, out, o0, o1)
		return
	}
	if p.p == nil {
		m.MulRange(out, p.x, p.nRows, o0, o1, make([]float32, m.In))
		return
	}
	blk := m.shape8()
	blk.rowBase = o0
	blk.metaStride = 2 * blk.gpad * 4
	sc := convPool.Get().(*convScratch)
	defer convPool.Put(sc)
	n := o1 - o0
	sc.packed = growBytes(sc.packed, n*m.In)
	sc.meta = growBytes(sc.meta, n*blk.metaStride)
	clear(sc.meta)
	blk.packed, blk.meta = sc.packed, sc.meta
	for r := range n {
		m.toAffine8(blk, r, o0+r)
	}
	blk.mulRangeAsm(p.p, out, o0, o1)
}

// e2m1Code8 is 2v+12 for each E2M1 code: the affine 8-bit value.
var e2m1Code8 = func() (t [16]uint8) {
	for c := range t {
		t[c] = uint8(2*quant.E2M1(uint8(c)) + 12)
	}
	return t
}()

// toAffine8 writes row o of m as row r of the 8-bit block.
func (m *FPMatrix) toAffine8(blk *Matrix, r, o int) {
	src := m.packed[o*m.rowBytes : (o+1)*m.rowBytes]
	dst := blk.packed[r*m.In : (r+1)*m.In]
	for i, b := range src {
		dst[2*i], dst[2*i+1] = e2m1Code8[b&15], e2m1Code8[b>>4]
	}
	meta := blk.meta[r*blk.metaStride:]
	gs := m.In / 32
	for g, sb := range m.scales[o*gs : (o+1)*gs] {
		s := m.scale[sb]
		putF32(meta[4*g:], s/2)
		putF32(meta[4*(blk.gpad+g):], -6*s)
	}
}

func growBytes(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func putF32(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) }

// fp4Tab is fp4Dot1's table: each E2M1 code's value times 2 as an int8,
// then the nibble mask.
var fp4Tab = func() (t [32]byte) {
	for c := range 16 {
		t[c] = byte(int8(2 * quant.E2M1(uint8(c))))
		t[16+c] = 0x0F
	}
	return t
}()

// fp8Tab is fp8Dot1's constants: the sign bit, the magnitude mask and
// 2^120 (the exponent bias difference between float32 and E4M3).
var fp8Tab = [3]uint32{0x80000000, 0x7F, math.Float32bits(float32(math.Ldexp(1, 120)))}

// mulOneRowAsm is the decode product of an mxfp4, nvfp4 or mxfp8 matrix:
// fp4Dot1 (fp4Dot1G16, fp8Dot1) per row, with the row's scales decoded to
// f32 first (halved for E2M1, whose table holds 2v).
func (m *FPMatrix) mulOneRowAsm(p *FPPrep, out []float32, o0, o1 int) {
	gs := m.In / m.Group
	var buf [256]float32
	sc := buf[:0]
	if gs > len(buf) {
		sc = make([]float32, 0, gs)
	}
	div := float32(2) // fp4Tab holds 2v
	if p.x8 {
		div = 1
	}
	for o := o0; o < o1; o++ {
		sc = sc[:0]
		for _, b := range m.scales[o*gs : (o+1)*gs] {
			sc = append(sc, m.scale[b]/div)
		}
		switch {
		case p.x8:
			out[o] = fp8Dot1(&p.x[0], &m.packed[o*m.rowBytes], &sc[0], gs, &fp8Tab[0])
		case m.Group == 16:
			out[o] = fp4Dot1G16(&p.xp[0], &m.packed[o*m.rowBytes], &sc[0], m.In/32, &fp4Tab[0])
		default:
			out[o] = fp4Dot1(&p.xp[0], &m.packed[o*m.rowBytes], &sc[0], gs, &fp4Tab[0])
		}
	}
}
