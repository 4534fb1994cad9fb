//go:build ignore

// asmgen writes the AVX2+FMA kernels kern{4,8}{bf16,f16,f32}_amd64.s and
// their Go declarations kern_amd64.go. Run `go generate` after editing.
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
//   - R = 1 (token generation, bound by weight bandwidth): per group,
//     dot(x_g, w_g) = scale*dot(x_g, q_g) + bias*sum(x_g). The inner loop is
//     just zero-extend, convert, FMA; the scale is applied once per group
//     and the bias term once per row as a vector dot of the row's biases
//     with the per-group sums of x (a.gsum). On Zen 4 this takes ~25% fewer
//     FMA-port operations than dequantizing every weight.
//   - R >= 2: each 8-lane weight vector is dequantized once (convert + one
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

// decode16 is decodeAt with the weights at SI.
func (g *gen) decode16(bits, c int, ya, yb string) { g.decodeAt(bits, c, "(SI)", ya, yb) }

// decodeAt emits the decode of 16 weights at byte offset off of mem into
// ya (panel lanes 0-7) and yb (lanes 8-15) as integer-valued floats.
// At 4 bits, 8 bytes are zero-extended to dwords: the low nibbles are
// elements 0,2,..,14 and the high nibbles 1,3,..,15 (the panel stores x in
// that order); the shift needs no mask because the bytes were zero-extended.
func (g *gen) decodeAt(bits, c int, mem, ya, yb string) {
	if bits == 4 {
		g.l("VPMOVZXBD %d%s, %s", c*8, mem, ya)
		g.l("VPSRLD $4, %s, %s", ya, yb)
		g.l("VPAND Y12, %s, %s", ya, ya)
	} else {
		g.l("VPMOVZXBD %d%s, %s", c*16, mem, ya)
		g.l("VPMOVZXBD %d%s, %s", c*16+8, mem, yb)
	}
	g.l("VCVTDQ2PS %s, %s", ya, ya)
	g.l("VCVTDQ2PS %s, %s", yb, yb)
}

// The one-activation-row kernels decode 4-bit weights 32 at a time: one
// zero-extension of 16 bytes to 8 dwords, each dword holding the nibbles of
// elements 4i..4i+3 at bits 0, 4, 8 and 12. Element 4i+k is then isolated
// by a mask (k < 3, leaving it scaled by 16^k) or a shift (k = 3), with no
// extra shift to bring it down: the panel stores x[4i+k]/16^k instead,
// which is exact (a power of two), so the products are unchanged. That is
// 13 vector operations per 32 weights against 14 for unpacking bytes.

// mask4 loads the 0xF0 and 0x0F00 masks (0x0F is Y12 from the prologue).
func (g *gen) mask4(m1, m2 string) {
	g.l("MOVL $0xf0, R9")
	g.l("MOVQ R9, %s", xreg(m1))
	g.l("VPBROADCASTD %s, %s", xreg(m1), m1)
	g.l("MOVL $0xf00, R9")
	g.l("MOVQ R9, %s", xreg(m2))
	g.l("VPBROADCASTD %s, %s", xreg(m2), m2)
}

// nib4 leaves element k of each 4-element slot of z (see above) in t as
// float: masks[k] is the mask register for k < 3.
func (g *gen) nib4(k int, z, t string, masks [3]string) {
	if k < 3 {
		g.l("VPAND %s, %s, %s", masks[k], z, t)
	} else {
		g.l("VPSRLD $12, %s, %s", z, t)
	}
	g.l("VCVTDQ2PS %s, %s", t, t)
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
	if bits == 4 {
		g.l("MOVL $0x0f, R9")
		g.l("MOVQ R9, X12")
		g.l("VPBROADCASTD X12, Y12")
	}
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
//	Y8..Y11 decoded weights, Y10 also the scale, Y12 nibble mask.
//	SI weights, DX meta row, R8 scale pointer, DI panel, R10 out,
//	CX/BX group and iteration counters, R9 scratch.
func (g *gen) kernel1(bits int, dt dtype) string {
	name := fmt.Sprintf("q%dr1%s", bits, dt.name)
	g.prologue(name, bits)
	if bits == 4 {
		g.mask4("Y5", "Y6")
	}
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
	if bits == 4 {
		masks := [3]string{"Y12", "Y5", "Y6"}
		g.l("VPMOVZXWD (SI), Y7")
		for k := 0; k < 4; k++ {
			g.nib4(k, "Y7", fmt.Sprintf("Y%d", 8+k), masks)
		}
	} else {
		g.decode16(bits, 0, "Y8", "Y9")
		g.decode16(bits, 1, "Y10", "Y11")
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
//	Y14 / Y15 row accumulators, Y8..Y11 decoded weights, Y12 nibble mask,
//	Y13 x (later reduction scratch).
//	Row 1's weights are at (SI)(R9*1) with R9 = the weight row stride.
func (g *gen) kernel1x2(bits int, dt dtype) string {
	name := fmt.Sprintf("q%dr1x2%s", bits, dt.name)
	g.prologue(name, bits)
	if bits == 4 {
		g.mask4("Y4", "Y5")
	}
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
	g.l("MOVQ R12, BX")
	g.label(name + "_iter")
	// Two accumulators per row suffice here: an iteration does twice the
	// work of kernel1's, which covers two chained FMA latencies, and the
	// group end then needs one add per row instead of three.
	if bits == 4 {
		// Rows 0 and 1 zero-extended in Y6 / Y7, one element slot at a
		// time decoded into Y8 / Y9 and multiplied by the shared x in Y13.
		masks := [3]string{"Y12", "Y4", "Y5"}
		g.l("VPMOVZXWD (SI), Y6")
		g.l("VPMOVZXWD (SI)(R9*1), Y7")
		for k := 0; k < 4; k++ {
			g.nib4(k, "Y6", "Y8", masks)
			g.nib4(k, "Y7", "Y9", masks)
			g.l("VMOVUPS %d(DI), Y13", k*32)
			g.l("VFMADD231PS Y13, Y8, Y%d", k%2)
			g.l("VFMADD231PS Y13, Y9, Y%d", 2+k%2)
		}
	} else {
		for c := 0; c < 2; c++ {
			g.decodeAt(bits, c, "(SI)", "Y8", "Y9")
			g.decodeAt(bits, c, "(SI)(R9*1)", "Y10", "Y11")
			for h := 0; h < 2; h++ {
				g.l("VMOVUPS %d(DI), Y13", c*64+h*32)
				g.l("VFMADD231PS Y13, Y%d, Y%d", 8+h, h)
				g.l("VFMADD231PS Y13, Y%d, Y%d", 10+h, 2+h)
			}
		}
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
					fmt.Fprintf(&sw, "\tcase %d<<8 | %d<<4 | 0:\n\t\t%s(w, meta, x, out, a)\n", bits, dtCode[dt.name], n2)
				} else {
					name = g.kernelN(bits, R, dt)
				}
				fmt.Fprintf(&decl, "//go:noescape\nfunc %s(w, meta *byte, x, out *float32, a *kargs)\n\n", name)
				fmt.Fprintf(&sw, "\tcase %d<<8 | %d<<4 | %d:\n\t\t%s(w, meta, x, out, a)\n", bits, dtCode[dt.name], R, name)
			}
			file := fmt.Sprintf("kern%d%s_amd64.s", bits, dt.name)
			if err := os.WriteFile(file, g.b.Bytes(), 0o644); err != nil {
				panic(err)
			}
		}
	}
	// A switch rather than a table of func values: calls through func
	// values defeat escape analysis and would heap-allocate the kargs.
	fmt.Fprintf(&decl, "// callKernel runs the kernel for bits, scale dtype code dt and r rows\n// (r = 0: the R=1 kernel for pairs of output rows).\n")
	fmt.Fprintf(&decl, "func callKernel(bits, dt, r int, w, meta *byte, x, out *float32, a *kargs) {\n")
	fmt.Fprintf(&decl, "\tswitch bits<<8 | dt<<4 | r {\n%s\tdefault:\n\t\tpanic(\"qmat: no kernel\")\n\t}\n}\n", sw.String())
	if err := os.WriteFile("kern_amd64.go", decl.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
