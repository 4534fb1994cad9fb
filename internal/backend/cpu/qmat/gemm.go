package qmat

import "sync"

// The many-row path (prompt processing). The multi-row kernels decode
// each weight vector again for every block of 8 activation rows; with
// hundreds of rows that decode, and the panel reloads of a kernel that
// keeps only one accumulator per row, hold them at about 80% of the FMA
// peak. Here a block of weight rows is instead dequantized once per call
// into f32 (dequant4/8, a fraction of an operation per weight), and a
// register-blocked micro-kernel (gemm6x16: 6 weight rows x 16 activation
// rows, 12 accumulators) does nothing but loads and FMAs.
//
// Activations are packed transposed, 16 rows to a strip: xt[strip][k][16]
// (at 4 bits each 16 k-values in the evens-then-odds order in which
// dequant4 writes the weights). The micro-kernel's vector lanes are
// activation rows, so the weights are broadcast and need no transposing,
// and the transposed result tile (6 outputs x 16 rows) is scattered into
// out at the end of each block. A row's result is the same whatever rows
// share its strip or call: each lane sums over k in one fixed order.

// gemmMinRows is the activation row count from which the many-row path
// beats the multi-row kernels: below it, dequantizing the weights costs
// more than the repeated decode it saves.
const gemmMinRows = 64

// gemmRows is the number of weight rows dequantized together (4 strips of
// 6): each activation strip is reused from L1/L2 by 4 micro-kernel calls.
const gemmRows = 24

// gemmKC bounds the K-block: the dequantized rows (gemmRows*gemmKC*4 =
// 96 KiB) and one activation strip (16*gemmKC*4 = 64 KiB) stay in L2.
const gemmKC = 1024

// useGemm reports whether nRows rows go through the many-row path.
func (m *Matrix) useGemm(nRows int) bool {
	return nRows >= gemmMinRows && (m.Bits == 4 || m.Bits == 8) && m.In%16 == 0
}

// buildXT packs x [nRows, In] into p.panel as transposed strips of 16
// rows, zero-padded to whole strips. par runs the strips (nil: here).
func (m *Matrix) buildXT(p *prep, x []float32, nRows int, par func(n int, f func(i int))) {
	strips := (nRows + 15) / 16
	p.panel = grow(p.panel, strips*16*m.In)
	p.strips = strips
	if par == nil {
		for s := range strips {
			m.buildStrip(p.panel, x, nRows, s)
		}
		return
	}
	par(strips, func(s int) { m.buildStrip(p.panel, x, nRows, s) })
}

// xtTab are the byte offsets in a strip's 16-k block at which xtStrip
// stores each k: in order (8 bits) or evens then odds (4 bits).
var xtTab = func() (t [2][16]int) {
	for i := range 16 {
		t[0][i] = 64 * i
		t[1][i] = 64 * (i/2 + 8*(i%2))
	}
	return t
}()

// buildStrip transposes rows 16s..16s+15 of x into strip s of panel.
func (m *Matrix) buildStrip(panel, x []float32, nRows, s int) {
	in := m.In
	dst := panel[s*16*in : (s+1)*16*in]
	n := min(16, nRows-s*16)
	if n == 16 && useAsm {
		tab := &xtTab[0]
		if m.Bits == 4 {
			tab = &xtTab[1]
		}
		_ = x[(s*16+15)*in+in-1] // bounds of the 16 rows read
		xtStrip(&dst[0], &x[s*16*in], in, in, &tab[0])
		return
	}
	if n < 16 {
		clear(dst)
	}
	for r := range n {
		src := x[(s*16+r)*in : (s*16+r+1)*in]
		if m.Bits == 8 {
			for k, v := range src {
				dst[k*16+r] = v
			}
			continue
		}
		// 4 bits: within each 16 values, evens then odds.
		for k0 := 0; k0+16 <= in; k0 += 16 {
			v := (*[16]float32)(src[k0:])
			d := dst[k0*16+r:]
			for i := range 8 {
				d[i*16] = v[2*i]
				d[(8+i)*16] = v[2*i+1]
			}
		}
	}
}

// gemmScratch is one worker's dequantized weights, scale/bias pairs and
// result tiles.
type gemmScratch struct {
	wd, sb, c []float32
}

var gemmPool = sync.Pool{New: func() any { return new(gemmScratch) }}

// gemmPanelBudget bounds the activation panel one pass works on. The
// panel is re-read for every block of gemmRows weight rows, so it must stay
// in cache: in L3 (shared by the workers, which read the same panel). A
// 2048-token prompt's panel for the 4864-wide down projection is 40 MB;
// it goes in blocks of tokens instead, each block dequantizing the
// weights again (a fraction of a cycle per weight, against hundreds of
// multiply-adds per weight per block).
const gemmPanelBudget = 6 << 20

// mulRangeGemm computes output columns [o0, o1) on the many-row path.
func (m *Matrix) mulRangeGemm(p *prep, out []float32, o0, o1 int) {
	sc := gemmPool.Get().(*gemmScratch)
	defer gemmPool.Put(sc)
	in, strips := m.In, p.strips
	kc := min(in, gemmKC)
	// K-blocks start on group boundaries (kc is a multiple of 64 or in).
	if kc < in {
		kc -= kc % m.Group
	}
	// Blocks of tb strips, as even as the budget allows.
	nb := (strips*16*in*4 + gemmPanelBudget - 1) / gemmPanelBudget
	tb := (strips + nb - 1) / nb
	// Rows of wd are kc+16 floats apart: at a multiple of 4 KiB the six
	// rows the micro-kernel streams would share L1 sets (and 4K-alias).
	ws := kc + 16
	sc.wd = grow(sc.wd, gemmRows*ws)
	sc.sb = grow(sc.sb, 2*(kc/m.Group))
	sc.c = grow(sc.c, gemmRows/6*tb*96)
	gb := m.Group * m.Bits / 8
	for t0 := 0; t0 < strips; t0 += tb {
		t1 := min(t0+tb, strips)
		for ob := o0; ob < o1; ob += gemmRows {
			nr := min(gemmRows, o1-ob)
			ns := (nr + 5) / 6
			for k0 := 0; k0 < in; k0 += kc {
				kn := min(kc, in-k0)
				g0, ng := k0/m.Group, kn/m.Group
				for r := range ns * 6 {
					wr := sc.wd[r*ws : r*ws+kn]
					if r >= nr {
						clear(wr) // padding rows of the last strip
						continue
					}
					o := ob + r
					for g := range ng {
						sc.sb[2*g], sc.sb[2*g+1] = m.scaleBias(o, g0+g)
					}
					w := &m.packed[(o-m.rowBase)*m.rowBytes+g0*gb]
					if m.Bits == 4 {
						dequant4(&wr[0], w, &sc.sb[0], ng, m.Group)
					} else {
						dequant8(&wr[0], w, &sc.sb[0], ng, m.Group)
					}
				}
				acc := 0
				if k0 > 0 {
					acc = 1
				}
				for t := t0; t < t1; t++ {
					xt := &p.panel[t*16*in+k0*16]
					for s := range ns {
						gemm6x16(&sc.wd[s*6*ws], ws, xt, kn, &sc.c[(s*tb+t-t0)*96], acc)
					}
				}
			}
			// Scatter the transposed tiles: c[r][lane] is out[row
			// lane][col r]. Sixteen rows' lines stay in L1 while the six
			// columns of a tile fill them.
			for s := range ns {
				for t := t0; t < t1; t++ {
					tile := sc.c[(s*tb+t-t0)*96:][:96]
					rows := min(16, p.nRows-t*16)
					if nr-s*6 >= 6 {
						// Bounds: the tile's last element lands at
						// out[(t*16+rows-1)*Out + ob+s*6+5].
						_ = out[(t*16+rows-1)*m.Out+ob+s*6+5]
						gemmScatter6(&tile[0], &out[t*16*m.Out+ob+s*6], m.Out, rows)
						continue
					}
					for r := range nr - s*6 {
						col := ob + s*6 + r
						for l := range rows {
							out[(t*16+l)*m.Out+col] = tile[r*16+l]
						}
					}
				}
			}
		}
	}
}
