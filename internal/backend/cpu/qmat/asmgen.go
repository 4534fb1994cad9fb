//go:build ignore

// asmgen writes the AVX2+FMA kernels kern{4,8,23,56}{bf16,f16,f32}_amd64.s
// and their Go declarations kern_amd64.go. Run `go generate` after editing.
//
// The variants differ only in straight-line details (how many activation
// rows share one decoded weight vector, how scales and biases are widened),
// so generating them keeps the unrolled bodies consistent instead of
// maintaining 24 near-identical copies by hand.
//
// Every kernel has the Go signature
//
//	func k(w, meta *byte, x, out *float32, a *kargs)
//
// and handles a.nout consecutive output rows, a.groups groups of each
// (a K-block), for the R activation rows packed in the panel x (prep.go).
// One loop iteration consumes 32 weights of a row (16 bytes at 4 bits, 32
// at 8), which divides every group size (32, 64, 128).
//
// Two strategies, chosen by R:
//
//   - R = 1 (token generation, bound by weight bandwidth; all widths): per
//     group, dot(x_g, w_g) = scale*dot(x_g, q_g) + bias*sum(x_g). The inner
//     loop is just unpack, convert, FMA; the scale is applied once per
//     group and the bias term once per row as a vector dot of the row's
//     biases with the per-group sums of x (a.gsum). Pairs of output rows
//     share each activation load (kernel1x2).
//   - R >= 2 (4 and 8 bits): each 8-lane weight vector is dequantized once (convert + one
//     FMA with the broadcast scale and bias) and FMAed against all R rows,
//     which needs only one accumulator set per row (the factored form needs
//     two, and AVX2 has 16 vector registers).
package main

import (
	"bytes"
	"fmt"
	"os"
)

// kargs field offsets (must match kargs in asm_amd64.go).
const (
	kGroups     = 0
	kIters      = 8
	kNout       = 16
	kOutStride  = 24
	kWSkip      = 32
	kMetaStride = 40
	kBiasOff    = 48
	kFlags      = 56
	kGsum       = 64
	kGp8        = 72
	kWStride    = 80
	kScratch    = 88

	// scratchRow is the byte offset of row 1 in kargs.scratch: room for
	// 128 groups (the largest K-block of the one-row kernels).
	scratchRow = 512
)

// Flag bits in kargs.flags.
const (
	flagAccum = 1 // add to out instead of overwriting (K-blocks after the first)
	flagBias  = 2 // R=1: add the row's bias term (first K-block only)
)

type dtype struct {
	name string
	size int
	// bcast broadcasts one meta value at mem into y as f32.
	bcast func(mem, y string) []string
	// load8 loads 8 consecutive meta values at mem into y as f32.
	load8 func(mem, y string) []string
}

func xreg(y string) string { return "X" + y[1:] }

var dtypes = []dtype{
	{"bf16", 2,
		func(mem, y string) []string {
			// A bf16 is the top half of an f32: broadcast the 16-bit
			// pattern to every word, then shift each dword left by 16
			// (the low copy falls off, the high copy lands on top).
			return []string{"VPBROADCASTW " + mem + ", " + y, "VPSLLD $16, " + y + ", " + y}
		},
		func(mem, y string) []string {
			return []string{"VPMOVZXWD " + mem + ", " + y, "VPSLLD $16, " + y + ", " + y}
		}},
	{"f16", 2,
		func(mem, y string) []string {
			return []string{"VPBROADCASTW " + mem + ", " + xreg(y), "VCVTPH2PS " + xreg(y) + ", " + y}
		},
		func(mem, y string) []string {
			return []string{"VCVTPH2PS " + mem + ", " + y}
		}},
	{"f32", 4,
		func(mem, y string) []string { return []string{"VBROADCASTSS " + mem + ", " + y} },
		func(mem, y string) []string { return []string{"VMOVUPS " + mem + ", " + y} }},
}

type gen struct{ b bytes.Buffer }

func (g *gen) l(format string, args ...any) { fmt.Fprintf(&g.b, "\t"+format+"\n", args...) }
func (g *gen) ls(lines []string) {
	for _, s := range lines {
		g.l("%s", s)
	}
}
func (g *gen) label(s string) { fmt.Fprintf(&g.b, "%s:\n", s) }

// decode16 emits the decode of 16 weights at byte offset c*bits*2 of SI
// into ya (panel lanes 0-7) and yb (lanes 8-15) as integer-valued floats
// (the multi-row kernels, 4 and 8 bits). At 4 bits, 8 bytes are
// zero-extended to dwords: the low nibbles are elements 0,2,..,14 and the
// high nibbles 1,3,..,15 (the panel stores x in that order); the shift
// needs no mask because the bytes were zero-extended.
func (g *gen) decode16(bits, c int, ya, yb string) {
	if bits == 4 {
		g.l("VPMOVZXBD %d(SI), %s", c*8, ya)
		g.l("VPSRLD $4, %s, %s", ya, yb)
		g.l("VPAND Y12, %s, %s", ya, ya)
	} else {
		g.l("VPMOVZXBD %d(SI), %s", c*16, ya)
		g.l("VPMOVZXBD %d(SI), %s", c*16+8, yb)
	}
	g.l("VCVTDQ2PS %s, %s", ya, ya)
	g.l("VCVTDQ2PS %s, %s", yb, yb)
}

// dec1 decodes 32 weights of one row per loop iteration into four 8-lane
// float vectors; vector k is multiplied by panel vector k (32 bytes at
// offset 32k of the iteration's panel slice).
//
// At 4 bits, one zero-extension of 16 bytes gives 8 dwords, each holding the
// nibbles of elements 4i..4i+3 at bits 0, 4, 8 and 12. Element 4i+k is
// isolated by a mask (k < 3, leaving it scaled by 16^k) or a shift (k = 3),
// with no shift to bring it down: the panel stores x[4i+k]/16^k instead,
// which is exact (a power of two), so the products are unchanged. That is
// 13 vector operations per 32 weights against 14 for unpacking bytes.
//
// At 8 bits, vector k is bytes 8k..8k+7 zero-extended.
//
// At 2, 3, 5 and 6 bits, vector k holds elements 8k..8k+7, which occupy the
// `bits` bytes from byte k*bits: an 8-byte broadcast load brings them into
// every 128-bit lane, a byte shuffle gathers, for each element, the two
// bytes its bits touch into the low half of its dword, a per-lane variable
// shift drops the bits below it and a mask keeps `bits` bits. The load
// reads up to 8-bits bytes past the iteration's data, which is harmless
// except after the very last row of the matrix; the Go side runs that row
// from a padded copy.
type dec1 struct {
	bits int
	regs [3]string // 4 bits: 0x0F, 0xF0, 0x0F00 masks; 2/3/5/6: shuffle, shifts, value mask
}

func generic(bits int) bool { return bits != 4 && bits != 8 }

// tables emits the shuffle and shift tables of a generic width.
func (g *gen) tables(bits int) {
	var shuf [32]byte
	var shift [8]uint32
	for k := 0; k < 8; k++ {
		off := bits * k
		lo, hi := byte(off/8), byte(0x80)
		if off%8+bits > 8 {
			hi = lo + 1
		}
		// Dword k is bytes 4k..4k+3 of the shuffle; lanes 4-7 sit in the
		// upper 128 bits, which index the upper copy of the same 8 bytes.
		shuf[4*k], shuf[4*k+1], shuf[4*k+2], shuf[4*k+3] = lo, hi, 0x80, 0x80
		shift[k] = uint32(off % 8)
	}
	for i := 0; i < 4; i++ {
		var v uint64
		for j := 7; j >= 0; j-- {
			v = v<<8 | uint64(shuf[8*i+j])
		}
		fmt.Fprintf(&g.b, "DATA shuf%d<>+%d(SB)/8, $0x%016x\n", bits, 8*i, v)
	}
	fmt.Fprintf(&g.b, "GLOBL shuf%d<>(SB), RODATA|NOPTR, $32\n", bits)
	for i := 0; i < 4; i++ {
		fmt.Fprintf(&g.b, "DATA shift%d<>+%d(SB)/8, $0x%08x%08x\n", bits, 8*i, shift[2*i+1], shift[2*i])
	}
	fmt.Fprintf(&g.b, "GLOBL shift%d<>(SB), RODATA|NOPTR, $32\n", bits)
}

// setup loads the decoder's constant registers.
func (d dec1) setup(g *gen) {
	bcast := func(v int, y string) {
		g.l("MOVL $0x%x, R9", v)
		g.l("MOVQ R9, %s", xreg(y))
		g.l("VPBROADCASTD %s, %s", xreg(y), y)
	}
	switch {
	case d.bits == 4:
		bcast(0x0f, d.regs[0])
		bcast(0xf0, d.regs[1])
		bcast(0xf00, d.regs[2])
	case generic(d.bits):
		g.l("VMOVDQU shuf%d<>(SB), %s", d.bits, d.regs[0])
		g.l("VMOVDQU shift%d<>(SB), %s", d.bits, d.regs[1])
		bcast(1<<d.bits-1, d.regs[2])
	}
}

// pre runs once per iteration for the row at mem (z: its scratch register).
func (d dec1) pre(g *gen, mem, z string) {
	if d.bits == 4 {
		g.l("VPMOVZXWD %s, %s", mem, z)
	}
}

// vec decodes vector k of the row at mem into dst as floats.
func (d dec1) vec(g *gen, k int, mem, z, dst string) {
	switch {
	case d.bits == 4:
		if k < 3 {
			g.l("VPAND %s, %s, %s", d.regs[k], z, dst)
		} else {
			g.l("VPSRLD $12, %s, %s", z, dst)
		}
	case d.bits == 8:
		g.l("VPMOVZXBD %d%s, %s", 8*k, mem, dst)
	default:
		g.l("VPBROADCASTQ %d%s, %s", d.bits*k, mem, dst)
		g.l("VPSHUFB %s, %s, %s", d.regs[0], dst, dst)
		g.l("VPSRLVD %s, %s, %s", d.regs[1], dst, dst)
		g.l("VPAND %s, %s, %s", d.regs[2], dst, dst)
	}
	g.l("VCVTDQ2PS %s, %s", dst, dst)
}

func (g *gen) prologue(name string, bits int) {
	fmt.Fprintf(&g.b, "\n// func %s(w, meta *byte, x, out *float32, a *kargs)\n", name)
	fmt.Fprintf(&g.b, "TEXT ·%s(SB), NOSPLIT, $0-40\n", name)
	g.l("MOVQ w+0(FP), SI")
	g.l("MOVQ meta+8(FP), DX")
	g.l("MOVQ out+24(FP), R10")
	g.l("MOVQ a+32(FP), AX")
	g.l("MOVQ %d(AX), R11", kGroups)
	g.l("MOVQ %d(AX), R12", kIters)
	g.l("MOVQ %d(AX), R13", kNout)
}

// hsum reduces y to its lane sum in the low lane of its X register.
func (g *gen) hsum(n int) {
	g.l("VEXTRACTF128 $1, Y%d, X13", n)
	g.l("VADDPS X13, X%d, X%d", n, n)
	g.l("VHADDPS X%d, X%d, X%d", n, n, n)
	g.l("VHADDPS X%d, X%d, X%d", n, n, n)
}

// rowEnd advances to the next output row: SI skips the rest of the weight
// row, DX moves to the next meta row.
func (g *gen) rowEnd(name string) {
	g.l("ADDQ $4, R10")
	g.l("ADDQ %d(AX), SI", kWSkip)
	g.l("ADDQ %d(AX), DX", kMetaStride)
	g.l("DECQ R13")
	g.l("JNZ %s_row", name)
	g.l("VZEROUPPER")
	g.l("RET")
}

// kernel1 emits the R=1 kernel (factored scale and bias).
//
//	Y0..Y3 per-group partial dots, Y4 row accumulator,
//	Y8..Y11 decoded weights, Y10 also the scale, Y7 decoder scratch,
//	Y12, Y5, Y6 decoder constants.
//	SI weights, DX meta row, R8 scale pointer, DI panel, R10 out,
//	CX/BX group and iteration counters, R9 scratch.
func (g *gen) kernel1(bits int, dt dtype) string {
	name := fmt.Sprintf("q%dr1%s", bits, dt.name)
	g.prologue(name, bits)
	d := dec1{bits, [3]string{"Y12", "Y5", "Y6"}}
	d.setup(g)
	g.label(name + "_row")
	g.l("VXORPS Y4, Y4, Y4")
	g.l("MOVQ x+16(FP), DI")
	g.l("MOVQ DX, R8")
	g.l("MOVQ R11, CX")
	g.label(name + "_group")
	for a := 0; a < 4; a++ {
		g.l("VXORPS Y%d, Y%d, Y%d", a, a, a)
	}
	g.l("MOVQ R12, BX")
	g.label(name + "_iter")
	// Each FMA feeds its own accumulator so the four chains hide the FMA
	// latency.
	d.pre(g, "(SI)", "Y7")
	for k := 0; k < 4; k++ {
		d.vec(g, k, "(SI)", "Y7", fmt.Sprintf("Y%d", 8+k))
	}
	g.l("VFMADD231PS 0(DI), Y8, Y0")
	g.l("VFMADD231PS 32(DI), Y9, Y1")
	g.l("VFMADD231PS 64(DI), Y10, Y2")
	g.l("VFMADD231PS 96(DI), Y11, Y3")
	g.l("ADDQ $%d, SI", 32*bits/8)
	g.l("ADDQ $128, DI")
	g.l("DECQ BX")
	g.l("JNZ %s_iter", name)
	// Group end: out += scale * dot(x_g, q_g). The adds run on the FP add
	// ports, leaving one FMA per group.
	g.l("VADDPS Y1, Y0, Y0")
	g.l("VADDPS Y3, Y2, Y2")
	g.l("VADDPS Y2, Y0, Y0")
	g.ls(dt.bcast("(R8)", "Y10"))
	g.l("VFMADD231PS Y10, Y0, Y4")
	g.l("ADDQ $%d, R8", dt.size)
	g.l("DECQ CX")
	g.l("JNZ %s_group", name)
	// Row end: bias term, sum over all (padded) groups of bias*gsum.
	g.l("TESTQ $%d, %d(AX)", flagBias, kFlags)
	g.l("JZ %s_nobias", name)
	g.l("MOVQ %d(AX), R8", kBiasOff)
	g.l("ADDQ DX, R8")
	g.l("MOVQ %d(AX), R9", kGsum)
	g.l("MOVQ %d(AX), CX", kGp8)
	g.label(name + "_bias")
	g.ls(dt.load8("(R8)", "Y10"))
	g.l("VFMADD231PS (R9), Y10, Y4")
	g.l("ADDQ $%d, R8", 8*dt.size)
	g.l("ADDQ $32, R9")
	g.l("DECQ CX")
	g.l("JNZ %s_bias", name)
	g.label(name + "_nobias")
	g.hsum(4)
	g.l("TESTQ $%d, %d(AX)", flagAccum, kFlags)
	g.l("JZ %s_store", name)
	g.l("VADDSS (R10), X4, X4")
	g.label(name + "_store")
	g.l("VMOVSS X4, (R10)")
	g.rowEnd(name)
	return name
}

// kernel1x2 emits the R=1 kernel for pairs of output rows (a.nout even):
// like kernel1, but each x vector is loaded once for both rows, halving the
// activation loads, which otherwise outnumber the weight loads 2:1 and
// limit the loop.
//
//	Y0,Y1 / Y2,Y3 per-group partial dots of rows 0 / 1,
//	Y14 / Y15 row accumulators, Y8 / Y9 decoded weights of rows 0 / 1,
//	Y6 / Y7 decoder scratch, Y12, Y4, Y5 decoder constants,
//	Y10 / Y11 scales, Y13 x (later reduction scratch).
//	Row 1's weights are at (SI)(R9*1) with R9 = the weight row stride.
func (g *gen) kernel1x2(bits int, dt dtype) string {
	name := fmt.Sprintf("q%dr1x2%s", bits, dt.name)
	g.prologue(name, bits)
	d := dec1{bits, [3]string{"Y12", "Y4", "Y5"}}
	d.setup(g)
	g.l("SHRQ $1, R13")
	g.l("MOVQ %d(AX), R9", kWStride)
	g.label(name + "_row")
	// 16-bit scales: widen this K-block's scales of both rows to f32 in
	// a.scratch first (8 per two instructions), so each group end is a
	// plain broadcast load instead of a broadcast plus a shift/convert on
	// the vector ports. Reading up to 7 values past the block stays
	// inside the padded meta row.
	widen := dt.size == 2
	if widen {
		g.l("MOVQ DX, R8")
		g.l("MOVQ %d(AX), R9", kScratch)
		g.l("MOVQ %d(AX), BX", kMetaStride)
		g.l("MOVQ R11, CX")
		g.l("ADDQ $7, CX")
		g.l("SHRQ $3, CX")
		g.label(name + "_widen")
		g.ls(dt.load8("(R8)", "Y10"))
		g.ls(dt.load8("(R8)(BX*1)", "Y11"))
		g.l("VMOVUPS Y10, (R9)")
		g.l("VMOVUPS Y11, %d(R9)", scratchRow)
		g.l("ADDQ $16, R8")
		g.l("ADDQ $32, R9")
		g.l("DECQ CX")
		g.l("JNZ %s_widen", name)
		g.l("MOVQ %d(AX), R8", kScratch)
		g.l("MOVQ %d(AX), R9", kWStride)
	} else {
		g.l("MOVQ DX, R8")
	}
	g.l("VXORPS Y14, Y14, Y14")
	g.l("VXORPS Y15, Y15, Y15")
	g.l("MOVQ x+16(FP), DI")
	g.l("MOVQ R11, CX")
	g.label(name + "_group")
	for a := 0; a < 4; a++ {
		g.l("VXORPS Y%d, Y%d, Y%d", a, a, a)
	}
	// Prefetch the next pair of rows at the same offset: weights stream
	// from memory in token generation, and a pair is only a few hundred
	// bytes, too short for the hardware prefetchers to ramp up on before
	// the kernel jumps to the next one.
	g.l("LEAQ (SI)(R9*2), BX")
	g.l("PREFETCHT0 (BX)")
	g.l("PREFETCHT0 (BX)(R9*1)")
	g.l("MOVQ R12, BX")
	g.label(name + "_iter")
	// Two accumulators per row suffice here: an iteration does twice the
	// work of kernel1's, which covers two chained FMA latencies, and the
	// group end then needs one add per row instead of three.
	// Vector k of rows 0 and 1 is decoded into Y8 / Y9 and multiplied by
	// the shared x in Y13 (Y6 / Y7: the decoder's per-row scratch).
	d.pre(g, "(SI)", "Y6")
	d.pre(g, "(SI)(R9*1)", "Y7")
	for k := 0; k < 4; k++ {
		d.vec(g, k, "(SI)", "Y6", "Y8")
		d.vec(g, k, "(SI)(R9*1)", "Y7", "Y9")
		g.l("VMOVUPS %d(DI), Y13", k*32)
		g.l("VFMADD231PS Y13, Y8, Y%d", k%2)
		g.l("VFMADD231PS Y13, Y9, Y%d", 2+k%2)
	}
	g.l("ADDQ $%d, SI", 32*bits/8)
	g.l("ADDQ $128, DI")
	g.l("DECQ BX")
	g.l("JNZ %s_iter", name)
	g.l("VADDPS Y1, Y0, Y0")
	g.l("VADDPS Y3, Y2, Y2")
	if widen {
		g.l("VBROADCASTSS (R8), Y10")
		g.l("VBROADCASTSS %d(R8), Y11", scratchRow)
		g.l("ADDQ $4, R8")
	} else {
		g.l("MOVQ %d(AX), BX", kMetaStride)
		g.ls(dt.bcast("(R8)", "Y10"))
		g.ls(dt.bcast("(R8)(BX*1)", "Y11"))
		g.l("ADDQ $%d, R8", dt.size)
	}
	g.l("VFMADD231PS Y10, Y0, Y14")
	g.l("VFMADD231PS Y11, Y2, Y15")
	g.l("DECQ CX")
	g.l("JNZ %s_group", name)
	// Row end: bias terms of both rows, then reduce and store.
	g.l("TESTQ $%d, %d(AX)", flagBias, kFlags)
	g.l("JZ %s_nobias", name)
	g.l("MOVQ %d(AX), R8", kBiasOff)
	g.l("ADDQ DX, R8")
	g.l("MOVQ %d(AX), BX", kMetaStride)
	g.l("MOVQ %d(AX), R9", kGsum)
	g.l("MOVQ %d(AX), CX", kGp8)
	g.label(name + "_bias")
	g.ls(dt.load8("(R8)", "Y10"))
	g.ls(dt.load8("(R8)(BX*1)", "Y11"))
	g.l("VMOVUPS (R9), Y13")
	g.l("VFMADD231PS Y13, Y10, Y14")
	g.l("VFMADD231PS Y13, Y11, Y15")
	g.l("ADDQ $%d, R8", 8*dt.size)
	g.l("ADDQ $32, R9")
	g.l("DECQ CX")
	g.l("JNZ %s_bias", name)
	g.l("MOVQ %d(AX), R9", kWStride)
	g.label(name + "_nobias")
	g.hsum(14)
	g.hsum(15)
	g.l("TESTQ $%d, %d(AX)", flagAccum, kFlags)
	g.l("JZ %s_store", name)
	g.l("VADDSS (R10), X14, X14")
	g.l("VADDSS 4(R10), X15, X15")
	g.label(name + "_store")
	g.l("VMOVSS X14, (R10)")
	g.l("VMOVSS X15, 4(R10)")
	// Next pair: skip the rest of row 0 and all of row 1.
	g.l("ADDQ $8, R10")
	g.l("ADDQ %d(AX), SI", kWSkip)
	g.l("ADDQ R9, SI")
	g.l("ADDQ %d(AX), DX", kMetaStride)
	g.l("ADDQ %d(AX), DX", kMetaStride)
	g.l("DECQ R13")
	g.l("JNZ %s_row", name)
	g.l("VZEROUPPER")
	g.l("RET")
	return name
}

// accsPerRow: enough independent FMA chains per activation row to cover
// the FMA latency, within the 8 accumulator registers Y0..Y7.
func accsPerRow(r int) int {
	switch r {
	case 2:
		return 4
	case 4:
		return 2
	}
	return 1
}

// kernelN emits the R>=2 kernel (dequantize once, FMA into R rows).
//
//	Y0..Y7 accumulators, Y8/Y9 weights, Y10 scale, Y11 bias, Y12 mask.
//	SI weights, DX meta row, R8 scale pointer, R9 bias offset, DI panel,
//	R10 out, CX/BX counters.
func (g *gen) kernelN(bits, R int, dt dtype) string {
	name := fmt.Sprintf("q%dr%d%s", bits, R, dt.name)
	apr := accsPerRow(R)
	g.prologue(name, bits)
	if bits == 4 {
		g.l("MOVL $0x0f, R9")
		g.l("MOVQ R9, X12")
		g.l("VPBROADCASTD X12, Y12")
	}
	g.label(name + "_row")
	for a := 0; a < R*apr; a++ {
		g.l("VXORPS Y%d, Y%d, Y%d", a, a, a)
	}
	g.l("MOVQ x+16(FP), DI")
	g.l("MOVQ DX, R8")
	g.l("MOVQ %d(AX), R9", kBiasOff)
	g.l("MOVQ R11, CX")
	g.label(name + "_group")
	g.ls(dt.bcast("(R8)", "Y10"))
	g.ls(dt.bcast("(R8)(R9*1)", "Y11"))
	g.l("ADDQ $%d, R8", dt.size)
	g.l("MOVQ R12, BX")
	g.label(name + "_iter")
	// Panel chunk c of this iteration holds R rows of 16 floats each.
	for c := 0; c < 2; c++ {
		g.decode16(bits, c, "Y8", "Y9")
		g.l("VFMADD213PS Y11, Y10, Y8")
		g.l("VFMADD213PS Y11, Y10, Y9")
		for r := 0; r < R; r++ {
			for h := 0; h < 2; h++ {
				acc := r*apr + (2*c+h)%apr
				g.l("VFMADD231PS %d(DI), Y%d, Y%d", (c*R+r)*64+h*32, 8+h, acc)
			}
		}
	}
	g.l("ADDQ $%d, SI", 32*bits/8)
	g.l("ADDQ $%d, DI", 2*R*64)
	g.l("DECQ BX")
	g.l("JNZ %s_iter", name)
	g.l("DECQ CX")
	g.l("JNZ %s_group", name)
	// Reduce each row's accumulators and store (or add) at out + r*stride.
	for r := 0; r < R; r++ {
		base := r * apr
		for a := 1; a < apr; a++ {
			g.l("VADDPS Y%d, Y%d, Y%d", base+a, base, base)
		}
		g.hsum(base)
	}
	g.l("MOVQ R10, R8")
	g.l("MOVQ %d(AX), BX", kOutStride)
	g.l("TESTQ $%d, %d(AX)", flagAccum, kFlags)
	g.l("JZ %s_store", name)
	for r := 0; r < R; r++ {
		g.l("VADDSS (R8), X%d, X%d", r*apr, r*apr)
		g.l("VMOVSS X%d, (R8)", r*apr)
		g.l("ADDQ BX, R8")
	}
	g.l("JMP %s_next", name)
	g.label(name + "_store")
	for r := 0; r < R; r++ {
		g.l("VMOVSS X%d, (R8)", r*apr)
		g.l("ADDQ BX, R8")
	}
	g.label(name + "_next")
	g.rowEnd(name)
	return name
}

// dtCode numbers the scale dtypes for callKernel (see dtCode in asm_amd64.go).
var dtCode = map[string]int{"bf16": 0, "f16": 1, "f32": 2}

func main() {
	// One assembly file per (bits, scale dtype) keeps each file short.
	var decl, sw bytes.Buffer
	fmt.Fprintf(&decl, "// Code generated by asmgen.go; DO NOT EDIT.\n\n")
	fmt.Fprintf(&decl, "//go:build amd64 && !purego\n\npackage qmat\n\n")
	for _, bits := range []int{4, 8} {
		for _, dt := range dtypes {
			g := &gen{}
			fmt.Fprintf(&g.b, "// Code generated by asmgen.go; DO NOT EDIT.\n\n")
			fmt.Fprintf(&g.b, "//go:build amd64 && !purego\n\n#include \"textflag.h\"\n")
			for _, R := range []int{1, 2, 4, 8} {
				var name string
				if R == 1 {
					name = g.kernel1(bits, dt)
					n2 := g.kernel1x2(bits, dt)
					fmt.Fprintf(&decl, "//go:noescape\nfunc %s(w, meta *byte, x, out *float32, a *kargs)\n\n", n2)
					fmt.Fprintf(&sw, "\tcase 0x%x%x0:\n\t\t%s(w, meta, x, out, a)\n", bits, dtCode[dt.name], n2)
				} else {
					name = g.kernelN(bits, R, dt)
				}
				fmt.Fprintf(&decl, "//go:noescape\nfunc %s(w, meta *byte, x, out *float32, a *kargs)\n\n", name)
				fmt.Fprintf(&sw, "\tcase 0x%x%x%x:\n\t\t%s(w, meta, x, out, a)\n", bits, dtCode[dt.name], R, name)
			}
			file := fmt.Sprintf("kern%d%s_amd64.s", bits, dt.name)
			if err := os.WriteFile(file, g.b.Bytes(), 0o644); err != nil {
				panic(err)
			}
		}
	}
	// 2, 3, 5 and 6 bits: one-row kernels only, one file per pair of
	// widths and scale dtype.
	for _, pair := range [][]int{{2, 3}, {5, 6}} {
		for _, dt := range dtypes {
			g := &gen{}
			fmt.Fprintf(&g.b, "// Code generated by asmgen.go; DO NOT EDIT.\n\n")
			fmt.Fprintf(&g.b, "//go:build amd64 && !purego\n\n#include \"textflag.h\"\n\n")
			for _, bits := range pair {
				g.tables(bits)
			}
			for _, bits := range pair {
				for r, name := range []string{g.kernel1x2(bits, dt), g.kernel1(bits, dt)} {
					fmt.Fprintf(&decl, "//go:noescape\nfunc %s(w, meta *byte, x, out *float32, a *kargs)\n\n", name)
					fmt.Fprintf(&sw, "\tcase 0x%x%x%x:\n\t\t%s(w, meta, x, out, a)\n", bits, dtCode[dt.name], r, name)
				}
			}
			file := fmt.Sprintf("kern%d%d%s_amd64.s", pair[0], pair[1], dt.name)
			if err := os.WriteFile(file, g.b.Bytes(), 0o644); err != nil {
				panic(err)
			}
		}
	}
	// A switch rather than a table of func values: calls through func
	// values defeat escape analysis and would heap-allocate the kargs.
	fmt.Fprintf(&decl, "// callKernel runs the kernel for bits, scale dtype code dt and r rows\n// (r = 0: the R=1 kernel for pairs of output rows). Each case is the key\n// bits<<8 | dt<<4 | r written in hex: its digits are bits, dt and r.\n")
	fmt.Fprintf(&decl, "func callKernel(bits, dt, r int, w, meta *byte, x, out *float32, a *kargs) {\n")
	fmt.Fprintf(&decl, "\tswitch bits<<8 | dt<<4 | r {\n%s\tdefault:\n\t\tpanic(\"qmat: no kernel\")\n\t}\n}\n", sw.String())
	if err := os.WriteFile("kern_amd64.go", decl.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
