package qmat

import "sync"

// chunk is a block of activation rows handled by one kernel pass.
type chunk struct {
	r0, n int // activation rows r0 .. r0+n-1
	off   int // offset of the chunk's panel in prep.panel (floats)
}

// prep is the per-call activation state shared by every goroutine of a Mul:
// for the assembly path the activation panels, for the Go path the
// per-group sums of x. It is pooled because token generation calls Mul
// hundreds of times per token.
type prep struct {
	asm    bool
	x      []float32
	nRows  int
	panel  []float32
	chunks []chunk
	gsum   []float32
	gemm   bool // many-row path: panel holds transposed strips (gemm.go)
	strips int  // strips of 16 rows in the panel (gemm)
}

var prepPool = sync.Pool{New: func() any { return new(prep) }}

func (p *prep) release() {
	p.x = nil
	prepPool.Put(p)
}

// The multi-row kernels (4 and 8 bits) are unrolled for 8, 4 and 2
// activation rows; a call with nRows rows is covered greedily by those and
// the one-row kernel (e.g. 16 = 8+8, 7 = 4+2+1). Each chunk re-reads the
// weights, but chunks are visited innermost over a small block of output
// rows, so the repeats hit L1/L2. Other widths have one-row kernels only
// (asmRows in asm_*.go says which).
var rowsQ48 = []int{8, 4, 2, 1}

// prepare builds the activation-side state for x [nRows, In]; par, when
// not nil, runs independent parts of the packing in parallel.
func (m *Matrix) prepare(x []float32, nRows int, par ...func(n int, f func(i int))) *prep {
	p := prepPool.Get().(*prep)
	p.x, p.nRows = x, nRows
	rows := asmRows(m.Bits)
	p.asm = useAsm && rows != nil
	p.chunks = p.chunks[:0]
	p.gemm = p.asm && m.useGemm(nRows)
	if p.gemm {
		var run func(n int, f func(i int))
		if len(par) > 0 {
			run = par[0]
		}
		m.buildXT(p, x, nRows, run)
		return p
	}
	if p.asm {
		p.panel = grow(p.panel, nRows*m.In)
		// The one-row kernels add their bias term from the group sums of
		// their row (at c.r0*gpad), padded with zeros to gpad.
		p.gsum = grow(p.gsum, nRows*m.gpad)
		r0 := 0
		for _, n := range rows {
			for nRows-r0 >= n {
				c := chunk{r0: r0, n: n, off: r0 * m.In}
				m.buildPanel(p.panel[c.off:c.off+n*m.In], x[r0*m.In:(r0+n)*m.In], n)
				if n == 1 {
					gs := p.gsum[r0*m.gpad : (r0+1)*m.gpad]
					clear(gs[m.groups:])
					m.groupSums(gs, x[r0*m.In:(r0+1)*m.In])
				}
				p.chunks = append(p.chunks, c)
				r0 += n
			}
		}
		return p
	}
	p.gsum = grow(p.gsum, nRows*m.groups)
	for r := 0; r < nRows; r++ {
		m.groupSums(p.gsum[r*m.groups:(r+1)*m.groups], x[r*m.In:(r+1)*m.In])
	}
	return p
}

// groupSums writes the sum of each group of xr to dst[g].
func (m *Matrix) groupSums(dst, xr []float32) {
	for g := 0; g < m.groups; g++ {
		var s0, s1, s2, s3 float32
		seg := xr[g*m.Group : (g+1)*m.Group]
		for i := 0; i+4 <= len(seg); i += 4 {
			s0 += seg[i]
			s1 += seg[i+1]
			s2 += seg[i+2]
			s3 += seg[i+3]
		}
		dst[g] = (s0 + s1) + (s2 + s3)
	}
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// buildPanel lays out n activation rows for the kernels as [In/16][n][16]
// (one-row 4-bit panels differ, see buildPanel1q4):
// for each 16-element slice of the input dimension the n rows follow each
// other, so the kernel walks one pointer and finds row r at a constant
// offset. At 4 bits each 16-slice is stored evens first, then odds,
// because the kernel unpacks 8 bytes into their low nibbles (elements
// 0,2,..,14) and high nibbles (1,3,..,15).
func (m *Matrix) buildPanel(dst, x []float32, n int) {
	in := m.In
	if n == 1 && m.Bits == 4 {
		m.buildPanel1q4(dst, x)
		return
	}
	for k := 0; k < in/16; k++ {
		for r := 0; r < n; r++ {
			// Array pointers: one bounds check per 16 floats.
			src := (*[16]float32)(x[r*in+16*k:])
			d := (*[16]float32)(dst[(k*n+r)*16:])
			if m.Bits != 4 {
				*d = *src
				continue
			}
			d[0], d[1], d[2], d[3] = src[0], src[2], src[4], src[6]
			d[4], d[5], d[6], d[7] = src[8], src[10], src[12], src[14]
			d[8], d[9], d[10], d[11] = src[1], src[3], src[5], src[7]
			d[12], d[13], d[14], d[15] = src[9], src[11], src[13], src[15]
		}
	}
}

// buildPanel1q4 is the panel of the one-row 4-bit kernels (see asmgen.go):
// per 32 elements four vectors of 8, vector k holding x[4i+k] scaled by
// 1, 1/16, 1/256 and 1 (k = 3 is shifted down in the kernel, the others
// stay at their bit position in the 16-bit slot). Scaling by a power of
// two is exact.
func (m *Matrix) buildPanel1q4(dst, x []float32) {
	for c := 0; c+32 <= m.In; c += 32 {
		src := (*[32]float32)(x[c:])
		d := (*[32]float32)(dst[c:])
		for i := 0; i < 8; i++ {
			d[i] = src[4*i]
			d[8+i] = src[4*i+1] * (1.0 / 16)
			d[16+i] = src[4*i+2] * (1.0 / 256)
			d[24+i] = src[4*i+3]
		}
	}
}
