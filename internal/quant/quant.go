// Package quant is the reference implementation of MLX quantization (affine
// here; the floating-point modes mxfp4, nvfp4, mxfp8 in fp.go)
// as mlx_lm.convert writes it. It is written for clarity, not speed: the fast
// kernels (internal/backend/cpu/qmat) are tested against it.
//
// Format. A linear weight W [out, in] is stored as
//
//	.weight  uint32 [out, in*bits/32]   packed quantized values
//	.scales  float  [out, in/group]
//	.biases  float  [out, in/group]
//
// and element (o, i) dequantizes to scales[o][i/group]*q + biases[o][i/group].
//
// Packing. Each row is ONE little-endian bit stream: element j of the row
// occupies bits [j*bits, (j+1)*bits) of the stream, least significant bit
// first, where bit k of the stream is bit k%32 of word k/32. For 2, 4 and 8
// bits no value crosses a word, so element j of a word sits at bits
// (j%per)*bits. For 3, 5 and 6 bits values straddle word boundaries.
//
// This was checked against MLX's own code (mlx/backend/cpu/quantized.cpp):
// for power-of-two widths `quantize` ORs value k of a uint32 at k*bits; for
// 3 and 5 bits it packs 8 values into a 24- resp. 40-bit integer
// (value k at k*bits) and stores its bytes low byte first (3 resp. 5 bytes
// per 8 values), and for 6 bits 4 values into 3 bytes the same way. Its
// decoder `extract_bits` reads them back the same way, e.g. for 3 bits
// w[2] = (b0>>6) | (b1&1)<<2. Because every pack is a whole number of bytes
// written low byte first, consecutive packs concatenate into one LSB-first
// byte stream, which read as little-endian uint32 words is exactly the
// row-wide bit stream above. Every group (32, 64 or 128 elements) is
// group*bits/32 whole words, so groups never share a word.
package quant

import (
	"fmt"
	"math"
)

// ValidBits reports whether bits is a width MLX affine quantization uses.
func ValidBits(bits int) bool {
	switch bits {
	case 2, 3, 4, 5, 6, 8:
		return true
	}
	return false
}

// ValidGroup reports whether group is a group size MLX affine quantization
// uses.
func ValidGroup(group int) bool {
	return group == 32 || group == 64 || group == 128
}

// PackedCols is the number of uint32 words per row for in elements.
func PackedCols(in, bits int) int { return (in*bits + 31) / 32 }

// CheckShapes validates the shapes of a quantized linear weight of logical
// shape [out, in]: packedCols is the last dimension of .weight and scaleCols
// that of .scales/.biases.
func CheckShapes(out, in, packedCols, scaleCols, bits, group int) error {
	if !ValidBits(bits) {
		return fmt.Errorf("quant: unsupported bits %d (want 2, 3, 4, 5, 6 or 8)", bits)
	}
	if !ValidGroup(group) {
		return fmt.Errorf("quant: unsupported group size %d (want 32, 64 or 128)", group)
	}
	if out <= 0 || in <= 0 {
		return fmt.Errorf("quant: bad logical shape [%d, %d]", out, in)
	}
	if in%group != 0 {
		return fmt.Errorf("quant: in=%d is not a multiple of group %d", in, group)
	}
	if want := in * bits / 32; packedCols != want {
		return fmt.Errorf("quant: packed weight has %d words per row, want %d for in=%d at %d bits",
			packedCols, want, in, bits)
	}
	if want := in / group; scaleCols != want {
		return fmt.Errorf("quant: scales/biases have %d columns, want %d for in=%d group=%d",
			scaleCols, want, in, group)
	}
	return nil
}

// Pack packs one row of quantized values into little-endian uint32 words
// (see the package comment for the bit layout). Values must fit in bits;
// higher bits are masked off. The final word is zero padded.
func Pack(q []uint8, bits int) []uint32 {
	if bits < 1 || bits > 8 {
		panic(fmt.Sprintf("quant.Pack: bits %d out of range", bits))
	}
	words := make([]uint32, PackedCols(len(q), bits))
	mask := uint64(1)<<bits - 1
	for j, v := range q {
		bit := j * bits
		// Place the value in a 64-bit window starting at its word so a
		// straddling value spills into the next word naturally.
		w := (uint64(v) & mask) << (bit % 32)
		words[bit/32] |= uint32(w)
		if hi := uint32(w >> 32); hi != 0 {
			words[bit/32+1] |= hi
		}
	}
	return words
}

// Unpack extracts n values of the given width from one packed row.
func Unpack(words []uint32, bits, n int) []uint8 {
	if bits < 1 || bits > 8 {
		panic(fmt.Sprintf("quant.Unpack: bits %d out of range", bits))
	}
	if need := PackedCols(n, bits); len(words) < need {
		panic(fmt.Sprintf("quant.Unpack: %d values of %d bits need %d words, have %d",
			n, bits, need, len(words)))
	}
	q := make([]uint8, n)
	mask := uint64(1)<<bits - 1
	for j := range q {
		bit := j * bits
		w := uint64(words[bit/32])
		if bit/32+1 < len(words) {
			w |= uint64(words[bit/32+1]) << 32
		}
		q[j] = uint8(w >> (bit % 32) & mask)
	}
	return q
}

// Dequantize expands a packed matrix [rows, cols] to float32. words holds
// rows*cols*bits/32 words (row-major, one row after another) and scales and
// biases rows*cols/group values each.
func Dequantize(words []uint32, scales, biases []float32, rows, cols, bits, group int) ([]float32, error) {
	pc := cols * bits / 32
	sc := cols / group
	if err := CheckShapes(rows, cols, pc, sc, bits, group); err != nil {
		return nil, err
	}
	if len(words) < rows*pc || len(scales) < rows*sc || len(biases) < rows*sc {
		return nil, fmt.Errorf("quant: buffers too short for [%d, %d] (words %d, scales %d, biases %d)",
			rows, cols, len(words), len(scales), len(biases))
	}
	w := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		q := Unpack(words[r*pc:(r+1)*pc], bits, cols)
		for i, v := range q {
			g := r*sc + i/group
			w[r*cols+i] = scales[g]*float32(v) + biases[g]
		}
	}
	return w, nil
}

// Quantize quantizes a row-major float matrix [rows, cols] with MLX's affine
// rule, per group of `group` consecutive elements of a row:
//
//	scale = (max-min)/(2^bits-1), bias = min, q = round((w-bias)/scale)
//
// clamped to [0, 2^bits-1]. A constant group gets scale 0 and q = 0, so it
// dequantizes exactly to its value instead of dividing by zero. (Newer MLX
// versions nudge scale/bias so that 0 is exactly representable; the stored
// format is the same, and this simpler rule is enough to build test data.)
// It returns the packed words and the float32 scales and biases.
func Quantize(w []float32, rows, cols, bits, group int) (words []uint32, scales, biases []float32, err error) {
	pc := cols * bits / 32
	sc := cols / group
	if err := CheckShapes(rows, cols, pc, sc, bits, group); err != nil {
		return nil, nil, nil, err
	}
	if len(w) < rows*cols {
		return nil, nil, nil, fmt.Errorf("quant: have %d values, need %d", len(w), rows*cols)
	}
	words = make([]uint32, 0, rows*pc)
	scales = make([]float32, rows*sc)
	biases = make([]float32, rows*sc)
	levels := float32(int(1)<<bits - 1)
	q := make([]uint8, cols)
	for r := 0; r < rows; r++ {
		row := w[r*cols : (r+1)*cols]
		for g := 0; g < sc; g++ {
			seg := row[g*group : (g+1)*group]
			lo, hi := seg[0], seg[0]
			for _, v := range seg {
				lo = min(lo, v)
				hi = max(hi, v)
			}
			scale := (hi - lo) / levels
			scales[r*sc+g] = scale
			biases[r*sc+g] = lo
			for i, v := range seg {
				if scale == 0 {
					q[g*group+i] = 0
					continue
				}
				x := math.RoundToEven(float64((v - lo) / scale))
				q[g*group+i] = uint8(min(max(x, 0), float64(levels)))
			}
		}
		words = append(words, Pack(q, bits)...)
	}
	return words, scales, biases, nil
}
