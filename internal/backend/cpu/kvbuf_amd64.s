//go:build amd64 && !purego

#include "textflag.h"

// Decoders of the KV store's narrow dtypes (kvbuf.go): rows rows of d
// values (d a positive multiple of 8), row i read from src + offs[i]
// elements and written to dst + i*d, 8 values a step.

// func decodeRowsE4M3(dst *float32, src *uint8, offs *int32, rows, d int, scale float32)
//
// An E4M3 code's sign, exponent and mantissa, moved into an f16 word
// (sign to bit 15, the other 7 bits up by 7), are the same number times
// 2^-8, subnormals included (m*2^-9 becomes m*2^-17); F16C widens it and
// the caller's scale carries the 2^8. The NaN codes (magnitude 0x7F)
// would come out 480: their f16 exponent is set to all ones to keep them
// NaN.
TEXT ·decodeRowsE4M3(SB), NOSPLIT, $0-44
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), R8
	MOVQ         offs+16(FP), R9
	MOVQ         rows+24(FP), R10
	MOVQ         d+32(FP), R11
	VBROADCASTSS scale+40(FP), Y3
	MOVL         $0x007f007f, AX
	MOVD         AX, X4
	VPBROADCASTD X4, X4            // 0x7f a word: magnitude
	MOVL         $0x00800080, AX
	MOVD         AX, X5
	VPBROADCASTD X5, X5            // 0x80 a word: sign
	MOVL         $0x7c007c00, AX
	MOVD         AX, X7
	VPBROADCASTD X7, X7            // f16 exponent bits

e4m3row:
	MOVLQSX (R9), SI
	ADDQ    R8, SI
	MOVQ    R11, CX

e4m3loop:
	VPMOVZXBW (SI), X0
	VPAND     X4, X0, X1
	VPCMPEQW  X4, X1, X6           // NaN codes
	VPSLLW    $7, X1, X1
	VPAND     X5, X0, X2
	VPSLLW    $8, X2, X2
	VPOR      X2, X1, X1
	VPAND     X7, X6, X6
	VPOR      X6, X1, X1
	VCVTPH2PS X1, Y1
	VMULPS    Y3, Y1, Y1
	VMOVUPS   Y1, (DI)
	ADDQ      $8, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       e4m3loop
	ADDQ      $4, R9
	DECQ      R10
	JNZ       e4m3row
	VZEROUPPER
	RET

// func decodeRowsBF16(dst *float32, src *uint16, offs *int32, rows, d int)
TEXT ·decodeRowsBF16(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), R8
	MOVQ offs+16(FP), R9
	MOVQ rows+24(FP), R10
	MOVQ d+32(FP), R11

bf16row:
	MOVLQSX (R9), SI
	LEAQ    (R8)(SI*2), SI
	MOVQ    R11, CX

bf16loop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       bf16loop
	ADDQ      $4, R9
	DECQ      R10
	JNZ       bf16row
	VZEROUPPER
	RET
