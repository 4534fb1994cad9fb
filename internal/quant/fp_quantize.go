package quant

import (
	"fmt"
	"math"
)

// QuantizeFP quantizes a row-major float matrix [rows, cols] with MLX's
// rule for mode (mlx/ops.cpp fp_quantize, its fallback path), per group:
//
//	s = max|w| / m            (m = 6 for E2M1 elements, 448 for E4M3)
//	E8M0 (mxfp4, mxfp8): e = round(log2 s) (0 for an all-zero group),
//	                     byte = e+127, w' = w / 2^e
//	E4M3 (nvfp4):        byte = E4M3(s), w' = w / decoded(byte)
//
// then E2M1 elements are the nearest table value to w' (ties to the lower
// code, MLX's argmin) and E4M3 elements w' rounded to nearest even. It
// returns the packed row bytes and the scale bytes. Arithmetic is float32,
// so a group computed in bf16 by MLX may round its scale differently; the
// tests compare against checkpoints re-quantized from the same float32.
func QuantizeFP(mode string, w []float32, rows, cols int) (packed, scales []byte, err error) {
	bits, group, ok := FPParams(mode)
	if !ok {
		return nil, nil, fmt.Errorf("quant: %q is not a floating-point mode", mode)
	}
	if err := CheckFPShapes(mode, rows, cols, cols*bits/8, cols/group); err != nil {
		return nil, nil, err
	}
	if len(w) < rows*cols {
		return nil, nil, fmt.Errorf("quant: have %d values, need %d", len(w), rows*cols)
	}
	maxval := float32(6)
	if bits == 8 {
		maxval = 448
	}
	rb := cols * bits / 8
	packed = make([]byte, rows*rb)
	scales = make([]byte, rows*cols/group)
	for r := range rows {
		for g := range cols / group {
			seg := w[r*cols+g*group : r*cols+(g+1)*group]
			var amax float32
			for _, v := range seg {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			sb, div := fpGroupScale(mode, amax/maxval)
			scales[r*cols/group+g] = sb
			for i, v := range seg {
				x := float32(0)
				if div != 0 {
					x = v / div
				}
				putFPElement(packed[r*rb:(r+1)*rb], g*group+i, bits, x)
			}
		}
	}
	return packed, scales, nil
}

// fpGroupScale encodes a group's scale s and returns its byte and the
// divisor the elements are scaled by.
func fpGroupScale(mode string, s float32) (uint8, float32) {
	if mode == NVFP4 {
		b := EncodeE4M3(s)
		return b, E4M3(b)
	}
	e := 0
	if s != 0 {
		e = int(math.RoundToEven(math.Log2(float64(s))))
		e = min(max(e, -127), 127)
	}
	return uint8(e + 127), float32(math.Ldexp(1, e))
}

func putFPElement(row []byte, i, bits int, x float32) {
	if bits == 8 {
		row[i] = EncodeE4M3(x)
		return
	}
	c := EncodeE2M1(x)
	row[i/2] |= c << (4 * (i & 1))
}

// EncodeE2M1 is the code of the table value nearest x, the first code on
// ties (MLX's argmin over the table); beyond +-6 it saturates.
func EncodeE2M1(x float32) uint8 {
	best, bd := uint8(0), float32(math.Inf(1))
	for c, v := range e2m1 {
		if d := float32(math.Abs(float64(x - v))); d < bd {
			best, bd = uint8(c), d
		}
	}
	return best
}

// EncodeE4M3 rounds x to the nearest E4M3 value, ties to the even code,
// saturating at +-448 (0x7E), as MLX's and PyTorch's conversion do.
func EncodeE4M3(x float32) uint8 {
	sign := uint8(0)
	if math.Signbit(float64(x)) {
		sign, x = 0x80, -x
	}
	if x >= 448 {
		return sign | 0x7E
	}
	best, bd := uint8(0), float32(math.Inf(1))
	for c := uint8(0); c <= 0x7E; c++ {
		d := float32(math.Abs(float64(x - E4M3(c))))
		if d < bd || (d == bd && c&1 == 0) {
			best, bd = c, d
		}
	}
	return sign | best
}
