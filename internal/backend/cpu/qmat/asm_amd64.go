//go:build amd64 && !purego

package qmat

import "github.com/mlxcel/mlxcel/internal/tensor"

// kargs are the loop bounds of one kernel call; the assembly reads them at
// fixed offsets (the k* constants in asmgen.go), so keep the order.
type kargs struct {
	groups     int      // groups per row in this call (a K-block)
	iters      int      // 32-weight iterations per group (Group/32)
	nout       int      // output rows to compute
	outStride  int      // bytes between activation rows of out
	wskip      int      // weight bytes from the end of a K-block to the next row's
	metaStride int      // meta bytes per row
	biasOff    int      // offset of the biases within a meta row
	flags      int      // flagAccum | flagBias
	gsum       *float32 // R=1: per-group sums of x, padded to gp8*8
	gp8        int      // padded groups / 8
	wstride    int      // weight bytes per row
	scratch    *float32 // one-row pair kernel: f32 scales of a K-block, 2 rows x 128
}

const (
	flagAccum = 1 // add to out (K-blocks after the first)
	flagBias  = 2 // R=1 kernel: add the row's bias term
)

// dtCode matches the scale dtype codes baked into callKernel.
func dtCode(d tensor.DType) int {
	switch d {
	case tensor.BF16:
		return 0
	case tensor.F16:
		return 1
	}
	return 2
}

const (
	// panelBudget bounds the slice of an activation panel one kernel call
	// walks: it is re-read for every output row, so it must stay in L1
	// (32 KiB on Zen 4) next to the streaming weights; wider inputs are
	// split into K-blocks. One-row panels get half, leaving room for the
	// weight stream that dominates that case; multi-row kernels do enough
	// work per row to afford fewer, larger K-blocks.
	panelBudget1 = 16 << 10
	panelBudget  = 32 << 10
	// weightBlock bounds the weight bytes of a block of output rows that
	// all activation chunks visit before moving on, so that the second and
	// later chunks find the block in L2 instead of memory.
	weightBlock = 128 << 10
	// maxKG is the largest K-block (in groups) of the one-row kernels,
	// the capacity of their scale scratch (scratchRow in asmgen.go).
	maxKG = 128
)

// asmRows lists the activation-row counts with kernels for a bit width
// (nil: Go path only).
func asmRows(bits int) []int {
	switch bits {
	case 4, 8:
		return rowsQ48
	case 2, 3, 5, 6:
		return rowsQ48[3:]
	}
	return nil
}

// mulRangeAsm computes output rows [o0, o1) with the kernels. The loops
// run over blocks of output rows, then K-blocks of the input dimension,
// then activation chunks: each chunk's panel slice stays in L1 while the
// block's rows stream past it, and the block's weights stay in L2 for the
// chunks after the first. Later K-blocks add to the partial sums in out.
func (m *Matrix) mulRangeAsm(p *prep, out []float32, o0, o1 int) {
	if p.gemm {
		m.mulRangeGemm(p, out, o0, o1)
		return
	}
	es := m.es
	gb := m.Group * m.Bits / 8
	maxR := p.chunks[0].n
	budget := panelBudget
	if maxR == 1 {
		budget = panelBudget1
	}
	kg := max(1, min(m.groups, maxKG, budget/(maxR*m.Group*4)))
	ob := o1 - o0
	if len(p.chunks) > 1 || kg < m.groups {
		ob = max(1, min(ob, weightBlock/(kg*gb)))
	}
	var scratch [2 * maxKG]float32
	a := kargs{
		scratch:    &scratch[0],
		iters:      m.Group / 32,
		outStride:  m.Out * 4,
		metaStride: m.metaStride,
		biasOff:    m.gpad * es,
		gp8:        m.gpad / 8,
		wstride:    m.rowBytes,
	}
	for b0 := o0; b0 < o1; b0 += ob {
		b1 := min(b0+ob, o1)
		for g0 := 0; g0 < m.groups; g0 += kg {
			ng := min(kg, m.groups-g0)
			a.groups = ng
			a.wskip = m.rowBytes - ng*gb
			a.flags = flagBias
			if g0 > 0 {
				a.flags = flagAccum
			}
			for _, c := range p.chunks {
				// The panel is [In/16][n][16]; K-block g0 starts at
				// 16-slice g0*Group/16.
				x := &p.panel[c.off+g0*m.Group*c.n]
				if c.n == 1 {
					a.gsum = &p.gsum[c.r0*m.gpad]
					m.oneRow(&a, g0, b0, b1, x, out[c.r0*m.Out:])
					continue
				}
				a.nout = b1 - b0
				m.kernel(c.n, &a, g0, b0, x, out[c.r0*m.Out:])
			}
		}
	}
}

// kernel runs the r-row kernel (r = 0: the one-row kernel on pairs of
// output rows) from output row o of K-block g0; outRow is out for
// activation row 0 of the chunk.
func (m *Matrix) kernel(r int, a *kargs, g0, o int, x *float32, outRow []float32) {
	gb := m.Group * m.Bits / 8
	w := m.packed[(o-m.rowBase)*m.rowBytes+g0*gb:]
	if m.tail != nil && o+a.nout == m.Out && r == 1 && a.nout == 1 {
		// The very last row: the generic decoders read a few bytes past
		// it, so it runs from a padded copy.
		w = m.tail[g0*gb:]
	}
	callKernel(m.Bits, dtCode(m.metaType), r, &w[0],
		&m.meta[(o-m.rowBase)*m.metaStride+g0*m.es], x, &outRow[o], a)
}

// oneRow runs the one-row kernels over output rows [o0, o1): pairs first,
// then an odd row alone, and the matrix's last row alone if the kernels
// must not read past it.
func (m *Matrix) oneRow(a *kargs, g0, o0, o1 int, x *float32, outRow []float32) {
	last := o1
	if m.tail != nil && o1 == m.Out {
		last--
	}
	if n := (last - o0) &^ 1; n > 0 {
		a.nout = n
		m.kernel(0, a, g0, o0, x, outRow)
		o0 += n
	}
	for ; o0 < o1; o0++ {
		a.nout = 1
		m.kernel(1, a, g0, o0, x, outRow)
	}
}
