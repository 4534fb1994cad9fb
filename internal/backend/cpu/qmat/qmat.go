// Package qmat is the CPU quantized matrix multiply: out = x · Wᵀ where W is
// an MLX affine-quantized linear weight (see package quant for the format).
// It reads the packed weights in place — a full dequantized copy would
// multiply the memory traffic by 4-8x, and token generation is bound by
// exactly that traffic.
//
// Per group, w = scale*q + bias. The amd64 kernels (AVX2+FMA) turn eight
// quantized values at a time into floats (zero-extend, convert, one FMA with
// the broadcast scale and bias) and FMA them against up to 8 activation rows,
// so one pass over the weights serves a whole block of rows and the decode
// work is shared. Activations are repacked once per call into a "panel"
// (panel.go) matching the order in which the kernel unpacks nibbles. Every
// other bit width, and CPUs without AVX2/FMA/F16C, use the pure-Go path
// (generic.go), which computes the same thing group by group.
package qmat

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// useAsm selects the assembly kernels (4 and 8 bits). It is set at init from
// the CPU features; tests flip it to cover the Go path too.
var (
	useAsm       bool
	asmAvailable bool
)

// Matrix is a quantized linear weight [Out, In] ready for multiplication.
type Matrix struct {
	Out, In, Bits, Group int

	// packed is the .weight tensor exactly as stored (Out rows of rowBytes
	// little-endian bytes). It is referenced, not copied, so a memory-mapped
	// checkpoint is used in place.
	packed   []byte
	rowBytes int
	groups   int // groups per row
	gpad     int // groups rounded up to a multiple of 8

	// meta holds per output row the row's scales and then its biases, each
	// padded with zeros to gpad values, so a row's meta is one sequential
	// stream and the biases can be read 8 at a time. They keep the file's
	// precision: bf16 and f16 stay 2 bytes (the kernels widen them;
	// converting to f32 would add 1/8 to the bytes read per token at
	// 4 bits / group 64), f32 stays f32.
	meta       []byte
	metaStride int // bytes per row of meta
	metaType   tensor.DType
}

// New wraps a quantized weight. packed holds out*in*bits/8 bytes
// (little-endian uint32 words as in the checkpoint); it is referenced, so
// the caller must keep it alive and unmodified. scales and biases hold
// out*(in/group) values of scaleDType (F32, F16 or BF16).
func New(out, in, bits, group int, packed []byte, scales, biases []byte, scaleDType tensor.DType) (*Matrix, error) {
	if in*bits%32 != 0 {
		return nil, fmt.Errorf("qmat: in=%d at %d bits is not a whole number of words", in, bits)
	}
	if err := quant.CheckShapes(out, in, in*bits/32, in/max(group, 1), bits, group); err != nil {
		return nil, err
	}
	m := &Matrix{Out: out, In: in, Bits: bits, Group: group,
		rowBytes: in * bits / 8, groups: in / group}
	if len(packed) != out*m.rowBytes {
		return nil, fmt.Errorf("qmat: packed weight has %d bytes, want %d for [%d, %d] at %d bits",
			len(packed), out*m.rowBytes, out, in, bits)
	}
	m.packed = packed
	switch scaleDType {
	case tensor.BF16, tensor.F16, tensor.F32:
	default:
		return nil, fmt.Errorf("qmat: unsupported scale dtype %s", scaleDType)
	}
	es := scaleDType.Size()
	n := out * m.groups
	if len(scales) != n*es || len(biases) != n*es {
		return nil, fmt.Errorf("qmat: scales/biases have %d/%d bytes, want %d (%d %s values)",
			len(scales), len(biases), n*es, n, scaleDType)
	}
	m.metaType = scaleDType
	m.gpad = (m.groups + 7) &^ 7
	m.metaStride = 2 * m.gpad * es
	m.meta = make([]byte, out*m.metaStride)
	rb := m.groups * es
	for o := 0; o < out; o++ {
		row := m.meta[o*m.metaStride:]
		copy(row, scales[o*rb:(o+1)*rb])
		copy(row[m.gpad*es:], biases[o*rb:(o+1)*rb])
	}
	return m, nil
}

// WeightBytes is the number of bytes one full multiplication reads from the
// weight: packed values plus the scales and biases (as stored in the file;
// the padding of short meta rows is not counted).
func (m *Matrix) WeightBytes() int64 {
	return int64(len(m.packed) + 2*m.Out*m.groups*m.metaType.Size())
}

// scaleBias returns the scale and bias of group g of row o as float32.
func (m *Matrix) scaleBias(o, g int) (float32, float32) {
	es := m.metaType.Size()
	s := m.meta[o*m.metaStride+g*es:]
	b := m.meta[o*m.metaStride+(m.gpad+g)*es:]
	switch m.metaType {
	case tensor.BF16:
		return tensor.BF16ToF32(uint16(s[0]) | uint16(s[1])<<8),
			tensor.BF16ToF32(uint16(b[0]) | uint16(b[1])<<8)
	case tensor.F16:
		return tensor.F16ToF32(uint16(s[0]) | uint16(s[1])<<8),
			tensor.F16ToF32(uint16(b[0]) | uint16(b[1])<<8)
	default:
		return math.Float32frombits(binary.LittleEndian.Uint32(s)),
			math.Float32frombits(binary.LittleEndian.Uint32(b))
	}
}

// DequantRow writes row o of W (In floats) to dst, e.g. for an embedding
// lookup with tied quantized embeddings.
func (m *Matrix) DequantRow(dst []float32, o int) {
	if o < 0 || o >= m.Out {
		panic(fmt.Sprintf("qmat.DequantRow: row %d of %d", o, m.Out))
	}
	dst = dst[:m.In]
	gb := m.Group * m.Bits / 8
	row := m.packed[o*m.rowBytes : (o+1)*m.rowBytes]
	for g := 0; g < m.groups; g++ {
		s, b := m.scaleBias(o, g)
		d := dst[g*m.Group : (g+1)*m.Group]
		decodeGroup(d, row[g*gb:(g+1)*gb], m.Bits)
		for i, q := range d {
			d[i] = s*q + b
		}
	}
}

// MulRange computes output columns o0..o1 of out = x · Wᵀ for nRows
// activation rows: out is [nRows, Out] and x is [nRows, In], both row-major.
// Other columns of out are not touched, so goroutines may fill disjoint
// column ranges of the same out concurrently.
func (m *Matrix) MulRange(out, x []float32, nRows int, o0, o1 int) {
	m.check(out, x, nRows)
	if o0 < 0 || o1 > m.Out || o0 > o1 {
		panic(fmt.Sprintf("qmat.MulRange: columns [%d, %d) of %d", o0, o1, m.Out))
	}
	if nRows == 0 || o0 == o1 {
		return
	}
	p := m.prepare(x, nRows)
	m.mulRange(p, out, o0, o1)
	p.release()
}

// Mul computes out = x · Wᵀ for all columns, split over threads goroutines
// (threads <= 0 means runtime.NumCPU()).
func (m *Matrix) Mul(out, x []float32, nRows int, threads int) {
	m.check(out, x, nRows)
	if nRows == 0 {
		return
	}
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	// Keep each goroutine's share at least a few rows' worth of work so
	// tiny matrices don't pay more in scheduling than in arithmetic.
	const minCols = 16
	threads = min(threads, max(m.Out/minCols, 1))
	p := m.prepare(x, nRows)
	defer p.release()
	if threads == 1 {
		m.mulRange(p, out, 0, m.Out)
		return
	}
	// Hand out blocks of output rows from a shared counter instead of one
	// fixed range per goroutine: when another process holds a core, or
	// cores run at different speeds, a static split waits for the slowest
	// share. Blocks are multiples of 16 rows (whole output cache lines
	// per activation row, so goroutines never write the same line) and
	// about 8 per goroutine, few enough that the per-call overhead stays
	// small. The calling goroutine works too.
	blk := max(16, (m.Out/(threads*8)+15)&^15)
	nblk := (m.Out + blk - 1) / blk
	var next atomic.Int64
	work := func() {
		for {
			b := int(next.Add(1) - 1)
			if b >= nblk {
				return
			}
			m.mulRange(p, out, b*blk, min((b+1)*blk, m.Out))
		}
	}
	var wg sync.WaitGroup
	for t := 1; t < min(threads, nblk); t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

func (m *Matrix) check(out, x []float32, nRows int) {
	if nRows < 0 || len(out) < nRows*m.Out || len(x) < nRows*m.In {
		panic(fmt.Sprintf("qmat: %d rows need out %d and x %d floats, have %d and %d",
			nRows, nRows*m.Out, nRows*m.In, len(out), len(x)))
	}
}

// mulRange dispatches to the assembly or Go path.
func (m *Matrix) mulRange(p *prep, out []float32, o0, o1 int) {
	if p.asm {
		m.mulRangeAsm(p, out, o0, o1)
		return
	}
	m.mulRangeGo(p, out, o0, o1)
}
