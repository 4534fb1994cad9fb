//go:build amd64 && !purego

#include "textflag.h"

// Kernels of the many-row path (gemm.go): weights are dequantized once
// per call into f32 rows, then a register-blocked micro-kernel multiplies
// 6 weight rows by 16 activation rows.

// func gemm6x16(w *float32, ws int, xt *float32, k int, c *float32, acc int)
//
// c[r][0:16] = (acc != 0 ? c[r][0:16] : 0) + sum_i w[r*ws+i] * xt[i][0:16]
// for r < 6 and i < k. xt is a transposed activation strip (16 rows per
// k), so each k is two vector loads shared by 6 broadcast weights: 12
// FMAs into 12 independent accumulators per 8 loads, which keeps both
// FMA pipes busy (the accumulators cover the 4-cycle FMA latency 3 times
// over). Each accumulator lane is one activation row's dot product,
// summed in k order whatever else is in the strip.
//
//	R8 weight rows 0-2 (R8, R8+R9, R8+2*R9), R10 rows 3-5, R9 row stride,
//	SI xt, CX k left, DI c. Y0-Y11 accumulators (row r: Y2r, Y2r+1),
//	Y12-Y13 activations, Y14-Y15 broadcasts.
TEXT ·gemm6x16(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R8
	MOVQ ws+8(FP), R9
	SHLQ $2, R9
	LEAQ (R8)(R9*2), R10
	ADDQ R9, R10
	MOVQ xt+16(FP), SI
	MOVQ k+24(FP), CX
	MOVQ c+32(FP), DI
	MOVQ acc+40(FP), AX
	TESTQ AX, AX
	JZ   g_zero
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7
	VMOVUPS 256(DI), Y8
	VMOVUPS 288(DI), Y9
	VMOVUPS 320(DI), Y10
	VMOVUPS 352(DI), Y11
	JMP  g_loop
g_zero:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

g_loop:
	VMOVUPS (SI), Y12
	VMOVUPS 32(SI), Y13
	VBROADCASTSS (R8), Y14
	VBROADCASTSS (R8)(R9*1), Y15
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (R8)(R9*2), Y14
	VBROADCASTSS (R10), Y15
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (R10)(R9*1), Y14
	VBROADCASTSS (R10)(R9*2), Y15
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ $4, R8
	ADDQ $4, R10
	ADDQ $64, SI
	DECQ CX
	JNZ  g_loop

	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	VMOVUPS Y8, 256(DI)
	VMOVUPS Y9, 288(DI)
	VMOVUPS Y10, 320(DI)
	VMOVUPS Y11, 352(DI)
	VZEROUPPER
	RET

// func dequant4(dst *float32, w *byte, sb *float32, groups, group int)
//
// dst = scale*q + bias for groups groups of group 4-bit weights at w,
// sb holding (scale, bias) per group as f32 pairs. Each 16 weights (8
// bytes) are written evens first, then odds: the byte zero-extended to a
// dword holds element 2i in its low nibble and 2i+1 in its high one, so
// this order costs no shuffle (the activations are permuted to match).
TEXT ·dequant4(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ sb+16(FP), DX
	MOVQ groups+24(FP), CX
	MOVQ group+32(FP), R8
	SHRQ $4, R8
	MOVL $0x0f, AX
	MOVQ AX, X15
	VPBROADCASTD X15, Y15
dq4_group:
	VBROADCASTSS (DX), Y12
	VBROADCASTSS 4(DX), Y13
	MOVQ R8, BX
dq4_16:
	VPMOVZXBD (SI), Y0
	VPSRLD $4, Y0, Y1
	VPAND Y15, Y0, Y0
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VFMADD213PS Y13, Y12, Y0
	VFMADD213PS Y13, Y12, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $8, SI
	ADDQ $64, DI
	DECQ BX
	JNZ  dq4_16
	ADDQ $8, DX
	DECQ CX
	JNZ  dq4_group
	VZEROUPPER
	RET

// func dequant8(dst *float32, w *byte, sb *float32, groups, group int)
//
// As dequant4 for 8-bit weights, in natural order.
TEXT ·dequant8(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ sb+16(FP), DX
	MOVQ groups+24(FP), CX
	MOVQ group+32(FP), R8
	SHRQ $4, R8
dq8_group:
	VBROADCASTSS (DX), Y12
	VBROADCASTSS 4(DX), Y13
	MOVQ R8, BX
dq8_16:
	VPMOVZXBD (SI), Y0
	VPMOVZXBD 8(SI), Y1
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VFMADD213PS Y13, Y12, Y0
	VFMADD213PS Y13, Y12, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $16, SI
	ADDQ $64, DI
	DECQ BX
	JNZ  dq8_16
	ADDQ $8, DX
	DECQ CX
	JNZ  dq8_group
	VZEROUPPER
	RET

// func gemmScatter6(c, out *float32, ldo, rows int)
//
// out[l*ldo + r] = c[r*16 + l] for r < 6, l < rows: one 6-column result
// tile of gemm6x16 (stored transposed, a column per 16 floats) written
// into rows of out (ldo floats apart). Plain scalar moves: the tile is in
// L1 and each row of out gets 24 contiguous bytes.
TEXT ·gemmScatter6(SB), NOSPLIT, $0-32
	MOVQ c+0(FP), SI
	MOVQ out+8(FP), DI
	MOVQ ldo+16(FP), DX
	SHLQ $2, DX
	MOVQ rows+24(FP), CX
	TESTQ CX, CX
	JZ   gs_done
gs_row:
	MOVSS 0(SI), X0
	MOVSS 64(SI), X1
	MOVSS 128(SI), X2
	MOVSS 192(SI), X3
	MOVSS 256(SI), X4
	MOVSS 320(SI), X5
	MOVSS X0, 0(DI)
	MOVSS X1, 4(DI)
	MOVSS X2, 8(DI)
	MOVSS X3, 12(DI)
	MOVSS X4, 16(DI)
	MOVSS X5, 20(DI)
	ADDQ $4, SI
	ADDQ DX, DI
	DECQ CX
	JNZ  gs_row
gs_done:
	RET

// TRANSPOSE8 transposes the 8x8 block of floats in Y0..Y7 (row i in Yi)
// into Y8..Y15 (column j in Y8+j), clobbering Y0..Y7: unpack pairs of
// rows, shuffle pairs of pairs, then swap 128-bit halves.
#define TRANSPOSE8 \
	VUNPCKLPS Y1, Y0, Y8; \
	VUNPCKHPS Y1, Y0, Y9; \
	VUNPCKLPS Y3, Y2, Y10; \
	VUNPCKHPS Y3, Y2, Y11; \
	VUNPCKLPS Y5, Y4, Y12; \
	VUNPCKHPS Y5, Y4, Y13; \
	VUNPCKLPS Y7, Y6, Y14; \
	VUNPCKHPS Y7, Y6, Y15; \
	VSHUFPS $0x44, Y10, Y8, Y0; \
	VSHUFPS $0xEE, Y10, Y8, Y1; \
	VSHUFPS $0x44, Y11, Y9, Y2; \
	VSHUFPS $0xEE, Y11, Y9, Y3; \
	VSHUFPS $0x44, Y14, Y12, Y4; \
	VSHUFPS $0xEE, Y14, Y12, Y5; \
	VSHUFPS $0x44, Y15, Y13, Y6; \
	VSHUFPS $0xEE, Y15, Y13, Y7; \
	VPERM2F128 $0x20, Y4, Y0, Y8; \
	VPERM2F128 $0x20, Y5, Y1, Y9; \
	VPERM2F128 $0x20, Y6, Y2, Y10; \
	VPERM2F128 $0x20, Y7, Y3, Y11; \
	VPERM2F128 $0x31, Y4, Y0, Y12; \
	VPERM2F128 $0x31, Y5, Y1, Y13; \
	VPERM2F128 $0x31, Y6, Y2, Y14; \
	VPERM2F128 $0x31, Y7, Y3, Y15

// LOAD8 loads 8 floats of rows 0..7 at R8 (rows R9 bytes apart; R10 =
// R8+3*R9, R11 = R8+6*R9) plus off into Y0..Y7.
#define LOAD8(off) \
	VMOVUPS off(R8), Y0; \
	VMOVUPS off(R8)(R9*1), Y1; \
	VMOVUPS off(R8)(R9*2), Y2; \
	VMOVUPS off(R10), Y3; \
	VMOVUPS off(R10)(R9*1), Y4; \
	VMOVUPS off(R10)(R9*2), Y5; \
	VMOVUPS off(R11), Y6; \
	VMOVUPS off(R11)(R9*1), Y7

// STORE8 stores Y8..Y15 (the values of 8 consecutive k for 8 rows) at
// DI + tab[first+j] + lane, tab holding each k's byte offset in its
// 16-k block of the strip.
#define STORE8(first, lane) \
	MOVQ (first+0)*8(BX), AX; VMOVUPS Y8, lane(DI)(AX*1); \
	MOVQ (first+1)*8(BX), AX; VMOVUPS Y9, lane(DI)(AX*1); \
	MOVQ (first+2)*8(BX), AX; VMOVUPS Y10, lane(DI)(AX*1); \
	MOVQ (first+3)*8(BX), AX; VMOVUPS Y11, lane(DI)(AX*1); \
	MOVQ (first+4)*8(BX), AX; VMOVUPS Y12, lane(DI)(AX*1); \
	MOVQ (first+5)*8(BX), AX; VMOVUPS Y13, lane(DI)(AX*1); \
	MOVQ (first+6)*8(BX), AX; VMOVUPS Y14, lane(DI)(AX*1); \
	MOVQ (first+7)*8(BX), AX; VMOVUPS Y15, lane(DI)(AX*1)

// func xtStrip(dst, x *float32, ldx, k int, tab *int)
//
// Transposes 16 rows of x (ldx floats apart) into one activation strip:
// dst[pos(i)][r] = x[r][i] for i < k (a multiple of 16), where pos permutes
// each 16 k by tab (byte offsets of the 16 destinations in the block:
// identity, or evens then odds for 4-bit weights). Four 8x8 transposes per
// 16 k.
TEXT ·xtStrip(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ ldx+16(FP), R9
	SHLQ $2, R9
	MOVQ k+24(FP), CX
	SHRQ $4, CX
	MOVQ tab+32(FP), BX
	LEAQ (R9)(R9*2), R12 // 3 rows
	MOVQ R9, R13
	SHLQ $3, R13 // 8 rows
	TESTQ CX, CX
	JZ   xt_done
xt_block:
	// Rows 0-7.
	MOVQ SI, R8
	LEAQ (R8)(R12*1), R10
	LEAQ (R10)(R12*1), R11
	LOAD8(0)
	TRANSPOSE8
	STORE8(0, 0)
	LOAD8(32)
	TRANSPOSE8
	STORE8(8, 0)
	// Rows 8-15.
	LEAQ (SI)(R13*1), R8
	LEAQ (R8)(R12*1), R10
	LEAQ (R10)(R12*1), R11
	LOAD8(0)
	TRANSPOSE8
	STORE8(0, 32)
	LOAD8(32)
	TRANSPOSE8
	STORE8(8, 32)
	ADDQ $64, SI
	ADDQ $1024, DI
	DECQ CX
	JNZ  xt_block
xt_done:
	VZEROUPPER
	RET
