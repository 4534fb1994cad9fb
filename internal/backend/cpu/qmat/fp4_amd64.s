//go:build amd64 && !purego

#include "textflag.h"

// func fp4Dot1(x *float32, w *byte, sc *float32, groups int, tab *byte) float32
//
// One mxfp4 row dotted with one activation row (fp4.go). Per group of 32:
// the 16 code bytes are split into low and high nibbles, VPSHUFB maps
// each code to its E2M1 value times 2 as an int8 (tab[0:16]; tab[16:32]
// is the nibble mask), the bytes are sign-extended and converted 8 at a
// time and FMAed with x, which the caller packed evens-then-odds per group
// (low nibbles hold the even elements). The group's sum is then scaled by
// sc[g] (its scale / 2) into the total.
TEXT ·fp4Dot1(SB), NOSPLIT, $0-44
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ sc+16(FP), DX
	MOVQ groups+24(FP), CX
	MOVQ tab+32(FP), AX
	VMOVDQU (AX), X15
	VMOVDQU 16(AX), X14
	VXORPS Y0, Y0, Y0

loop:
	TESTQ CX, CX
	JE    done
	VMOVDQU   (DI), X1
	VPSRLW    $4, X1, X2
	VPAND     X14, X1, X1
	VPAND     X14, X2, X2
	VPSHUFB   X1, X15, X1
	VPSHUFB   X2, X15, X2
	VPMOVSXBD X1, Y3
	VPSRLDQ   $8, X1, X1
	VPMOVSXBD X1, Y4
	VPMOVSXBD X2, Y5
	VPSRLDQ   $8, X2, X2
	VPMOVSXBD X2, Y6
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VMULPS      (SI), Y3, Y7
	VFMADD231PS 32(SI), Y4, Y7
	VFMADD231PS 64(SI), Y5, Y7
	VFMADD231PS 96(SI), Y6, Y7
	VBROADCASTSS (DX), Y8
	VFMADD231PS  Y8, Y7, Y0
	ADDQ $128, SI
	ADDQ $16, DI
	ADDQ $4, DX
	DECQ CX
	JMP  loop

done:
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// func fp4Dot1G16(x *float32, w *byte, sc *float32, blocks int, tab *byte) float32
//
// fp4Dot1 for groups of 16 (nvfp4): a block of 32 elements spans two
// groups, so the even elements 0-14 and odd 1-15 (the first 8 low and 8
// high nibbles) take sc[2b] and the rest sc[2b+1].
TEXT ·fp4Dot1G16(SB), NOSPLIT, $0-44
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ sc+16(FP), DX
	MOVQ blocks+24(FP), CX
	MOVQ tab+32(FP), AX
	VMOVDQU (AX), X15
	VMOVDQU 16(AX), X14
	VXORPS Y0, Y0, Y0

loop16:
	TESTQ CX, CX
	JE    done16
	VMOVDQU   (DI), X1
	VPSRLW    $4, X1, X2
	VPAND     X14, X1, X1
	VPAND     X14, X2, X2
	VPSHUFB   X1, X15, X1
	VPSHUFB   X2, X15, X2
	VPMOVSXBD X1, Y3
	VPSRLDQ   $8, X1, X1
	VPMOVSXBD X1, Y4
	VPMOVSXBD X2, Y5
	VPSRLDQ   $8, X2, X2
	VPMOVSXBD X2, Y6
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VMULPS      (SI), Y3, Y7
	VFMADD231PS 64(SI), Y5, Y7
	VMULPS      32(SI), Y4, Y9
	VFMADD231PS 96(SI), Y6, Y9
	VBROADCASTSS (DX), Y8
	VFMADD231PS  Y8, Y7, Y0
	VBROADCASTSS 4(DX), Y8
	VFMADD231PS  Y8, Y9, Y0
	ADDQ $128, SI
	ADDQ $16, DI
	ADDQ $8, DX
	DECQ CX
	JMP  loop16

done16:
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// func fp8Dot1(x *float32, w *byte, sc *float32, groups int, tab *uint32) float32
//
// One mxfp8 row dotted with one activation row (natural order). An E4M3
// byte b becomes the float32 with bits ((b&0x7F)<<20) | ((b&0x80)<<24),
// which is its value times 2^-120 (subnormals included), so it is scaled
// by 2^120 before the FMA (tab: sign mask, 0x7F, 2^120). The group sum is
// then scaled by sc[g].
TEXT ·fp8Dot1(SB), NOSPLIT, $0-44
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ sc+16(FP), DX
	MOVQ groups+24(FP), CX
	MOVQ tab+32(FP), AX
	VPBROADCASTD (AX), Y13
	VPBROADCASTD 4(AX), Y14
	VBROADCASTSS 8(AX), Y15
	VXORPS Y0, Y0, Y0

loop8:
	TESTQ CX, CX
	JE    done8
	VXORPS Y7, Y7, Y7
	MOVQ   $4, BX

inner8:
	VPMOVZXBD   (DI), Y1
	VPSLLD      $24, Y1, Y2
	VPAND       Y13, Y2, Y2
	VPAND       Y14, Y1, Y1
	VPSLLD      $20, Y1, Y1
	VPOR        Y2, Y1, Y1
	VMULPS      Y15, Y1, Y1
	VFMADD231PS (SI), Y1, Y7
	ADDQ        $32, SI
	ADDQ        $8, DI
	DECQ        BX
	JNE         inner8
	VBROADCASTSS (DX), Y8
	VFMADD231PS  Y8, Y7, Y0
	ADDQ $4, DX
	DECQ CX
	JMP  loop8

done8:
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET
