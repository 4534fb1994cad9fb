package quant

// MLX's floating-point quantization modes (mlx/ops.cpp fp_quantize and
// fp_dequantize at ml-explore/mlx@846d176, mlx/backend/metal/kernels/fp8.h),
// which mlx-lm writes per module as `"mode": "mxfp4" | "nvfp4" | "mxfp8"`:
//
//	mode   element        group  scale (uint8 per group)
//	mxfp4  E2M1, 4 bits   32     E8M0: 2^(byte-127)
//	nvfp4  E2M1, 4 bits   16     E4M3
//	mxfp8  E4M3, 8 bits   32     E8M0
//
// and w = element * scale; there are no biases. A row's codes are packed
// into little-endian uint32 words LSB first, as affine 4/8-bit are: element
// i of a row is the low nibble of byte i/2 for even i and the high nibble
// for odd i (4 bits), or byte i (8 bits). openai's gpt-oss checkpoints store
// MXFP4 as `<proj>_blocks` uint8 [.., out, in/32, 16] and `<proj>_scales`
// uint8 [.., out, in/32]: the same bytes (mlx-lm's sanitize views the
// blocks as uint32).
//
// nvfp4 may also carry a global scale in MLX; mlx-lm's QuantizedLinear
// writes none, and neither does this reference.

import (
	"fmt"
	"math"
)

// Mode names as config.json's quantization block spells them.
const (
	Affine = "affine"
	MXFP4  = "mxfp4"
	NVFP4  = "nvfp4"
	MXFP8  = "mxfp8"
)

// FPParams returns the element width and group size of a floating-point
// mode; ok is false for affine and unknown modes.
func FPParams(mode string) (bits, group int, ok bool) {
	switch mode {
	case MXFP4:
		return 4, 32, true
	case NVFP4:
		return 4, 16, true
	case MXFP8:
		return 8, 32, true
	}
	return 0, 0, false
}

// IsFP reports whether mode is one of the floating-point modes.
func IsFP(mode string) bool { _, _, ok := FPParams(mode); return ok }

// e2m1 is the value of each 4-bit E2M1 code: bit 3 sign, bits 2-1
// exponent, bit 0 mantissa (MLX's and transformers' FP4 lookup table).
var e2m1 = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6}

// E2M1 decodes a 4-bit code (the low nibble of c).
func E2M1(c uint8) float32 { return e2m1[c&15] }

// E4M3 decodes an OCP E4M3 (fn) byte: sign, 4 exponent bits of bias 7,
// 3 mantissa bits, subnormals at exponent 0. MLX converts through a half
// shifted by 7 bits (fp8.h), which gives the same values; the two NaN
// codes (0x7F, 0xFF) decode as NaN here where MLX's Metal path yields
// +-480 — no quantizer writes them (they saturate at 0x7E, 448).
func E4M3(b uint8) float32 {
	e, m := int(b>>3&15), float32(b&7)
	var v float32
	switch {
	case e == 15 && m == 7:
		return float32(math.NaN())
	case e == 0:
		v = m / 8 * (1.0 / 64)
	default:
		v = float32(math.Ldexp(float64(1+m/8), e-7))
	}
	if b&0x80 != 0 {
		v = -v
	}
	return v
}

// E8M0 decodes a scale byte: 2^(b-127), as MLX's fp8_e8m0 (the float
// whose exponent field is b; b = 0 gives 2^-127, b = 255 +Inf).
func E8M0(b uint8) float32 {
	if b == 0 {
		return math.Float32frombits(0x400000)
	}
	return math.Float32frombits(uint32(b) << 23)
}

// FPScale decodes one group's scale byte for mode.
func FPScale(mode string, b uint8) float32 {
	if mode == NVFP4 {
		return E4M3(b)
	}
	return E8M0(b)
}

// FPElement decodes element i of a packed row (bytes, see the package
// comment) for an element width of bits.
func FPElement(row []byte, i, bits int) float32 {
	if bits == 8 {
		return E4M3(row[i])
	}
	return E2M1(row[i/2] >> (4 * (i & 1)))
}

// CheckFPShapes validates a floating-point quantized weight of logical
// shape [out, in]: rowBytes is the packed bytes per row (4 times the last
// dimension of .weight) and scaleCols the last dimension of .scales.
func CheckFPShapes(mode string, out, in, rowBytes, scaleCols int) error {
	bits, group, ok := FPParams(mode)
	if !ok {
		return fmt.Errorf("quant: %q is not a floating-point mode (mxfp4, nvfp4, mxfp8)", mode)
	}
	if out <= 0 || in <= 0 || in%group != 0 {
		return fmt.Errorf("quant: %s needs inputs in whole groups of %d, have [%d, %d]", mode, group, out, in)
	}
	if want := in * bits / 8; rowBytes != want {
		return fmt.Errorf("quant: %s weight has %d bytes per row, want %d for in=%d", mode, rowBytes, want, in)
	}
	if want := in / group; scaleCols != want {
		return fmt.Errorf("quant: %s scales have %d columns, want %d for in=%d group=%d", mode, scaleCols, want, in, group)
	}
	return nil
}

// DequantizeFP expands a floating-point quantized matrix [rows, cols]:
// packed holds rows*cols*bits/8 bytes, scales rows*cols/group bytes.
func DequantizeFP(mode string, packed, scales []byte, rows, cols int) ([]float32, error) {
	bits, group, _ := FPParams(mode)
	if err := CheckFPShapes(mode, rows, cols, cols*bits/8, cols/max(group, 1)); err != nil {
		return nil, err
	}
	rb, sc := cols*bits/8, cols/group
	if len(packed) < rows*rb || len(scales) < rows*sc {
		return nil, fmt.Errorf("quant: buffers too short for [%d, %d] %s (packed %d, scales %d)", rows, cols, mode, len(packed), len(scales))
	}
	w := make([]float32, rows*cols)
	for r := range rows {
		row := packed[r*rb : (r+1)*rb]
		for i := range cols {
			w[r*cols+i] = FPElement(row, i, bits) * FPScale(mode, scales[r*sc+i/group])
		}
	}
	return w, nil
}
