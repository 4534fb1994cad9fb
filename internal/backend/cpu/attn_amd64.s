//go:build amd64 && !purego

#include "textflag.h"

// AVX2+FMA kernels of the attention in attention.go. Eight query rows are
// processed together, one per vector lane: the queries are stored
// transposed, qt[d][8], so that score and softmax arithmetic for the 8
// rows is one vector operation, and every key or value element is loaded
// once (broadcast) for all 8 rows. Keys and values are addressed through
// a table of float offsets (offs[j]: key j's row in the layer's K or V,
// plus the KV head's offset), so paged blocks and rings read alike.

// Constants of the exp approximation (Cephes expf): exp(x) = 2^n * p(r)
// with n = round(x*log2(e)) and r = x - n*ln(2) in [-ln2/2, ln2/2], ln(2)
// split in two parts so r is exact; p is a degree-7 polynomial with
// relative error about 1e-7.
DATA expc<>+0(SB)/4, $0x3fb8aa3b  // log2(e)
DATA expc<>+4(SB)/4, $0x3f318000  // ln2 high part 0.693359375
DATA expc<>+8(SB)/4, $0xb95e8083  // ln2 low part -2.12194440e-4
DATA expc<>+12(SB)/4, $0x39506967 // p0 1.9875691500e-4
DATA expc<>+16(SB)/4, $0x3ab743ce // p1 1.3981999507e-3
DATA expc<>+20(SB)/4, $0x3c088908 // p2 8.3334519073e-3
DATA expc<>+24(SB)/4, $0x3d2aa9c1 // p3 4.1665795894e-2
DATA expc<>+28(SB)/4, $0x3e2aaaaa // p4 1.6666665459e-1
DATA expc<>+32(SB)/4, $0x3f000000 // p5 0.5
DATA expc<>+36(SB)/4, $0x3f800000 // 1
DATA expc<>+40(SB)/4, $0xc2aeac4f // -87.33654: below, exp underflows to 0
DATA expc<>+44(SB)/4, $0x42b00000 // 88: above, clamp (exp(88) = 1.65e38)
DATA expc<>+48(SB)/4, $0x0000007f // exponent bias 127
GLOBL expc<>(SB), RODATA|NOPTR, $52

// EXP8 computes Y15 = exp(Y15) using Y12..Y14 as scratch. Inputs below
// -87.34 give exactly 0 (masked scores are -1e30: a compare makes the
// mask Y14 = x >= lo, ANDed into 2^n), inputs above 88 are clamped. n is
// rounded to nearest (VROUNDPS $0), the polynomial evaluated by Horner
// up to the x^2 term, then p*x^2 + x + 1.
#define EXP8 \
	VBROADCASTSS expc<>+44(SB), Y12; \
	VMINPS Y12, Y15, Y15; \
	VBROADCASTSS expc<>+40(SB), Y12; \
	VCMPPS $5, Y12, Y15, Y14; \
	VMAXPS Y12, Y15, Y15; \
	VBROADCASTSS expc<>+0(SB), Y12; \
	VMULPS Y12, Y15, Y13; \
	VROUNDPS $0, Y13, Y13; \
	VBROADCASTSS expc<>+4(SB), Y12; \
	VFNMADD231PS Y12, Y13, Y15; \
	VBROADCASTSS expc<>+8(SB), Y12; \
	VFNMADD231PS Y12, Y13, Y15; \
	VCVTPS2DQ Y13, Y13; \
	VPBROADCASTD expc<>+48(SB), Y12; \
	VPADDD Y12, Y13, Y13; \
	VPSLLD $23, Y13, Y13; \
	VPAND Y14, Y13, Y13; \
	VBROADCASTSS expc<>+12(SB), Y14; \
	VBROADCASTSS expc<>+16(SB), Y12; \
	VFMADD213PS Y12, Y15, Y14; \
	VBROADCASTSS expc<>+20(SB), Y12; \
	VFMADD213PS Y12, Y15, Y14; \
	VBROADCASTSS expc<>+24(SB), Y12; \
	VFMADD213PS Y12, Y15, Y14; \
	VBROADCASTSS expc<>+28(SB), Y12; \
	VFMADD213PS Y12, Y15, Y14; \
	VBROADCASTSS expc<>+32(SB), Y12; \
	VFMADD213PS Y12, Y15, Y14; \
	VMULPS Y15, Y15, Y12; \
	VFMADD213PS Y15, Y12, Y14; \
	VBROADCASTSS expc<>+36(SB), Y12; \
	VADDPS Y12, Y14, Y14; \
	VMULPS Y13, Y14, Y15

// PREFETCH4 prefetches the first 256 bytes (64 dims) of the key row and
// value row whose offset is at off(BX); SI is the key base, AX the value
// base. Clobbers R13.
#define PREFETCH4(off) \
	MOVLQSX off(BX), R13; \
	PREFETCHT0 (SI)(R13*4); \
	PREFETCHT0 64(SI)(R13*4); \
	PREFETCHT0 128(SI)(R13*4); \
	PREFETCHT0 192(SI)(R13*4); \
	PREFETCHT0 (AX)(R13*4); \
	PREFETCHT0 64(AX)(R13*4); \
	PREFETCHT0 128(AX)(R13*4); \
	PREFETCHT0 192(AX)(R13*4)

// func attnScores(qt *float32, d int, kbase *float32, offs *int32, n int, st *float32, vbase *float32)
//
// st[j][0:8] = sum_d qt[d][0:8] * K_j[d] for the n keys K_j = kbase +
// offs[j]; d must be a multiple of 4. Keys go four at a time: per pair of
// dims, two query vectors and eight broadcast key elements feed eight
// FMAs into eight independent accumulators (two per key, so the FMA
// latency is covered).
//
//	DI qt, SI kbase, BX offs, CX keys left, DX st, R12 d,
//	R8-R11 key rows, AX qt cursor, R13 dim index.
//	Y0-Y7 accumulators, Y8-Y9 query vectors, Y10-Y15 broadcasts.
TEXT ·attnScores(SB), NOSPLIT, $0-56
	MOVQ qt+0(FP), DI
	MOVQ d+8(FP), R12
	MOVQ kbase+16(FP), SI
	MOVQ offs+24(FP), BX
	MOVQ n+32(FP), CX
	MOVQ st+40(FP), DX

sc_quad:
	CMPQ CX, $4
	JLT  sc_single
	MOVLQSX 0(BX), R8
	MOVLQSX 4(BX), R9
	MOVLQSX 8(BX), R10
	MOVLQSX 12(BX), R11
	LEAQ (SI)(R8*4), R8
	LEAQ (SI)(R9*4), R9
	LEAQ (SI)(R10*4), R10
	LEAQ (SI)(R11*4), R11
	// Prefetch the keys and values of the quad two ahead: in token
	// generation the KV cache comes from memory (the weights streamed
	// since this layer's last visit evicted it), and values prefetched
	// now are in cache when attnPV walks the chunk. Reading offs up to 12
	// entries past the chunk stays inside the offset buffer, whose spare
	// entries are 0 (a valid row).
	MOVQ vbase+48(FP), AX
	PREFETCH4(32)
	PREFETCH4(36)
	PREFETCH4(40)
	PREFETCH4(44)
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ DI, AX
	XORQ R13, R13

sc_quad_d:
	VMOVUPS (AX), Y8
	VMOVUPS 32(AX), Y9
	VBROADCASTSS (R8)(R13*4), Y10
	VBROADCASTSS 4(R8)(R13*4), Y11
	VBROADCASTSS (R9)(R13*4), Y12
	VBROADCASTSS 4(R9)(R13*4), Y13
	VBROADCASTSS (R10)(R13*4), Y14
	VBROADCASTSS 4(R10)(R13*4), Y15
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y11, Y1
	VFMADD231PS Y8, Y12, Y2
	VFMADD231PS Y9, Y13, Y3
	VFMADD231PS Y8, Y14, Y4
	VFMADD231PS Y9, Y15, Y5
	VBROADCASTSS (R11)(R13*4), Y10
	VBROADCASTSS 4(R11)(R13*4), Y11
	VFMADD231PS Y8, Y10, Y6
	VFMADD231PS Y9, Y11, Y7
	VMOVUPS 64(AX), Y8
	VMOVUPS 96(AX), Y9
	VBROADCASTSS 8(R8)(R13*4), Y10
	VBROADCASTSS 12(R8)(R13*4), Y11
	VBROADCASTSS 8(R9)(R13*4), Y12
	VBROADCASTSS 12(R9)(R13*4), Y13
	VBROADCASTSS 8(R10)(R13*4), Y14
	VBROADCASTSS 12(R10)(R13*4), Y15
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y11, Y1
	VFMADD231PS Y8, Y12, Y2
	VFMADD231PS Y9, Y13, Y3
	VFMADD231PS Y8, Y14, Y4
	VFMADD231PS Y9, Y15, Y5
	VBROADCASTSS 8(R11)(R13*4), Y10
	VBROADCASTSS 12(R11)(R13*4), Y11
	VFMADD231PS Y8, Y10, Y6
	VFMADD231PS Y9, Y11, Y7
	ADDQ $128, AX
	ADDQ $4, R13
	CMPQ R13, R12
	JLT  sc_quad_d

	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y5, Y4, Y4
	VADDPS Y7, Y6, Y6
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y2, 32(DX)
	VMOVUPS Y4, 64(DX)
	VMOVUPS Y6, 96(DX)
	ADDQ $128, DX
	ADDQ $16, BX
	SUBQ $4, CX
	JMP  sc_quad

sc_single:
	TESTQ CX, CX
	JZ    sc_done
	MOVLQSX 0(BX), R8
	LEAQ (SI)(R8*4), R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ DI, AX
	XORQ R13, R13

	// The same two chains as the quad loop (even dims 0,2 of each four
	// into Y0, odd into Y1), so a key's score does not depend on whether
	// it fell in a quad or in the tail of a chunk.
sc_single_d:
	VBROADCASTSS (R8)(R13*4), Y10
	VBROADCASTSS 4(R8)(R13*4), Y11
	VBROADCASTSS 8(R8)(R13*4), Y12
	VBROADCASTSS 12(R8)(R13*4), Y13
	VFMADD231PS (AX), Y10, Y0
	VFMADD231PS 32(AX), Y11, Y1
	VFMADD231PS 64(AX), Y12, Y0
	VFMADD231PS 96(AX), Y13, Y1
	ADDQ $128, AX
	ADDQ $4, R13
	CMPQ R13, R12
	JLT  sc_single_d

	VADDPS Y1, Y0, Y0
	VMOVUPS Y0, (DX)
	ADDQ $32, DX
	ADDQ $4, BX
	DECQ CX
	JMP  sc_single

sc_done:
	VZEROUPPER
	RET

// func attnSoftmax(st *float32, n int, ml *float32)
//
// One step of the online softmax over a chunk of n keys (n >= 1) for 8
// rows: ml holds the running max m[8], the running sum l[8] and receives
// the rescale factor f[8]. With m' = max(m, max_j st[j]): f = exp(m - m')
// (the output accumulator must be multiplied by it, which attnPV does as
// it loads it), l becomes l*f + sum_j p_j and st[j] is replaced by
// p_j = exp(st[j] - m').
//
//	SI st cursor, CX count, R8 ml. Y0 m', Y1 factor then l, Y2 sum of p,
//	Y12-Y15 EXP8.
TEXT ·attnSoftmax(SB), NOSPLIT, $0-24
	MOVQ st+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ ml+16(FP), R8

	VMOVUPS (R8), Y0
	MOVQ SI, AX
	MOVQ CX, BX
sm_max:
	VMAXPS (AX), Y0, Y0
	ADDQ $32, AX
	DECQ BX
	JNZ  sm_max

	// f = exp(m - m'); m = m'.
	VMOVUPS (R8), Y15
	VSUBPS Y0, Y15, Y15
	EXP8
	VMOVUPS Y0, (R8)
	VMOVUPS Y15, 64(R8)
	VMULPS 32(R8), Y15, Y1

	VXORPS Y2, Y2, Y2
sm_exp:
	VMOVUPS (SI), Y15
	VSUBPS Y0, Y15, Y15
	EXP8
	VMOVUPS Y15, (SI)
	VADDPS Y15, Y2, Y2
	ADDQ $32, SI
	DECQ CX
	JNZ  sm_exp

	VADDPS Y2, Y1, Y1
	VMOVUPS Y1, 32(R8)
	VZEROUPPER
	RET

// func attnPV(ot *float32, d int, vbase *float32, offs *int32, n int, pt *float32, f *float32)
//
// ot[e][0:8] = f[0:8]*ot[e][0:8] + sum_j pt[j][0:8] * V_j[e] for the n
// values V_j = vbase + offs[j]; d must be a multiple of 8. The output is
// walked 8 dims at a time, kept in eight accumulators (one FMA chain
// each) while all n values pass. Used when d is not a multiple of 32
// (attnPVRows is faster).
//
//	DI ot cursor, R12 dims left, SI vbase + dim offset, BX offs, CX count,
//	DX pt cursor. Y0-Y7 accumulators, Y8 p, Y9-Y15 broadcasts.
TEXT ·attnPV(SB), NOSPLIT, $0-56
	MOVQ ot+0(FP), DI
	MOVQ d+8(FP), R12
	MOVQ vbase+16(FP), SI
	MOVQ f+48(FP), AX
	VMOVUPS (AX), Y15

pv_dims:
	VMULPS 0(DI), Y15, Y0
	VMULPS 32(DI), Y15, Y1
	VMULPS 64(DI), Y15, Y2
	VMULPS 96(DI), Y15, Y3
	VMULPS 128(DI), Y15, Y4
	VMULPS 160(DI), Y15, Y5
	VMULPS 192(DI), Y15, Y6
	VMULPS 224(DI), Y15, Y7
	MOVQ offs+24(FP), BX
	MOVQ n+32(FP), CX
	MOVQ pt+40(FP), DX

pv_key:
	MOVLQSX (BX), R8
	LEAQ (SI)(R8*4), R8
	VMOVUPS (DX), Y8
	VBROADCASTSS 0(R8), Y9
	VBROADCASTSS 4(R8), Y10
	VBROADCASTSS 8(R8), Y11
	VBROADCASTSS 12(R8), Y12
	VFMADD231PS Y8, Y9, Y0
	VFMADD231PS Y8, Y10, Y1
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y8, Y12, Y3
	VBROADCASTSS 16(R8), Y13
	VBROADCASTSS 20(R8), Y14
	VBROADCASTSS 24(R8), Y12
	VBROADCASTSS 28(R8), Y9
	VFMADD231PS Y8, Y13, Y4
	VFMADD231PS Y8, Y14, Y5
	VFMADD231PS Y8, Y12, Y6
	VFMADD231PS Y8, Y9, Y7
	ADDQ $4, BX
	ADDQ $32, DX
	DECQ CX
	JNZ  pv_key

	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	ADDQ $256, DI
	ADDQ $32, SI
	SUBQ $8, R12
	JNZ  pv_dims
	VZEROUPPER
	RET

// func attnPVRows(o *float32, d int, vbase *float32, offs *int32, n int, pt *float32, f *float32)
//
// As attnPV with the output row-major, o[lane][e], for d a multiple of 32:
// per value row, four vector loads (32 dims) feed eight FMAs for two
// lanes, whose probabilities are broadcast: 2 broadcasts per 8 FMAs
// instead of 8 (broadcasts take a shuffle slot, FMAs compete for), and
// the accumulators still form eight independent chains. Passes: 4 lane
// pairs x d/32 dim blocks.
//
//	DI o row of lane 2p, R13 row bytes (4d), R12 dims left in the pass
//	set, SI vbase + dim offset, BX offs, CX count, DX pt + 4*2p cursor,
//	R9 f + 4*2p, R10 lane pairs left. Y0-Y3 / Y4-Y7 accumulators of
//	lanes 2p / 2p+1, Y8-Y11 values, Y12 / Y13 probabilities, Y14 / Y15
//	factors.
TEXT ·attnPVRows(SB), NOSPLIT, $0-56
	MOVQ o+0(FP), DI
	MOVQ d+8(FP), R13
	SHLQ $2, R13
	MOVQ f+48(FP), R9
	MOVQ $4, R10
pr_pair:
	MOVQ vbase+16(FP), SI
	MOVQ d+8(FP), R12
	VBROADCASTSS (R9), Y14
	VBROADCASTSS 4(R9), Y15
pr_dims:
	VMULPS 0(DI), Y14, Y0
	VMULPS 32(DI), Y14, Y1
	VMULPS 64(DI), Y14, Y2
	VMULPS 96(DI), Y14, Y3
	VMULPS 0(DI)(R13*1), Y15, Y4
	VMULPS 32(DI)(R13*1), Y15, Y5
	VMULPS 64(DI)(R13*1), Y15, Y6
	VMULPS 96(DI)(R13*1), Y15, Y7
	MOVQ offs+24(FP), BX
	MOVQ n+32(FP), CX
	MOVQ pt+40(FP), DX
	MOVQ $4, AX
	SUBQ R10, AX
	LEAQ (DX)(AX*8), DX // pt + 4*2p

pr_key:
	MOVLQSX (BX), R8
	LEAQ (SI)(R8*4), R8
	VMOVUPS 0(R8), Y8
	VMOVUPS 32(R8), Y9
	VMOVUPS 64(R8), Y10
	VMOVUPS 96(R8), Y11
	VBROADCASTSS (DX), Y12
	VBROADCASTSS 4(DX), Y13
	VFMADD231PS Y12, Y8, Y0
	VFMADD231PS Y12, Y9, Y1
	VFMADD231PS Y12, Y10, Y2
	VFMADD231PS Y12, Y11, Y3
	VFMADD231PS Y13, Y8, Y4
	VFMADD231PS Y13, Y9, Y5
	VFMADD231PS Y13, Y10, Y6
	VFMADD231PS Y13, Y11, Y7
	ADDQ $4, BX
	ADDQ $32, DX
	DECQ CX
	JNZ  pr_key

	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 0(DI)(R13*1)
	VMOVUPS Y5, 32(DI)(R13*1)
	VMOVUPS Y6, 64(DI)(R13*1)
	VMOVUPS Y7, 96(DI)(R13*1)
	ADDQ $128, DI
	ADDQ $128, SI
	SUBQ $32, R12
	JNZ  pr_dims
	// Next lane pair: DI is at the end of lane 2p's row; skip lane 2p+1's.
	ADDQ R13, DI
	ADDQ $8, R9
	DECQ R10
	JNZ  pr_pair
	VZEROUPPER
	RET

// func siluMul(dst, gate, up *float32, n int)
//
// dst[i] = g[i] / (1 + exp(-g[i])) * u[i] for n a multiple of 8 (dst may
// alias g or u).
TEXT ·siluMul(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   silu_done
	VBROADCASTSS expc<>+36(SB), Y11 // 1
silu_loop:
	VMOVUPS (SI), Y0
	VXORPS Y15, Y15, Y15
	VSUBPS Y0, Y15, Y15 // -g
	EXP8
	VADDPS Y11, Y15, Y15 // 1 + exp(-g)
	VMULPS (DX), Y0, Y0  // g*u
	VDIVPS Y15, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  silu_loop
silu_done:
	VZEROUPPER
	RET
