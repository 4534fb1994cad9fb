package tensor

import "math"

// OCP FP8 E4M3 (E4M3FN): 1 sign, 4 exponent bits with bias 7, 3 mantissa
// bits. There are no infinities: exponent 15 is a normal binade except
// mantissa 7, which is NaN (0x7F, 0xFF), so the largest finite value is
// 1.75*2^8 = 448 (0x7E). Exponent 0 holds the subnormals m*2^-9.

// E4M3Max is the largest finite E4M3 value.
const E4M3Max = 448

// e4m3Values is every code's value, built from the definition above.
var e4m3Values = func() (t [256]float32) {
	for c := range 256 {
		e, m := c>>3&0xf, c&7
		var v float64
		switch {
		case e == 15 && m == 7:
			v = math.NaN()
		case e == 0:
			v = math.Ldexp(float64(m), -9)
		default:
			v = math.Ldexp(1+float64(m)/8, e-7)
		}
		if c&0x80 != 0 {
			v = -v
		}
		t[c] = float32(v)
	}
	return t
}()

// E4M3ToF32 widens an E4M3 code (exact).
func E4M3ToF32(c uint8) float32 { return e4m3Values[c] }

// E4M3Table is the 256 codes' values, for decode loops that index it
// directly.
func E4M3Table() *[256]float32 { return &e4m3Values }

// F32ToE4M3 rounds to nearest even and saturates: magnitudes past 448,
// infinities included, become ±448, as the saturating conversions of the
// GPUs (__NV_SATFINITE) and vLLM's fp8 KV cache do; a NaN stays a NaN.
func F32ToE4M3(f float32) uint8 {
	u := math.Float32bits(f)
	sign := uint8(u>>24) & 0x80
	a := u & 0x7fffffff
	switch {
	case a > 0x7f800000:
		return sign | 0x7f
	case a >= 0x43e00000: // 448 and up (464 would round to the missing 480)
		return sign | 0x7e
	case a < 0x3c800000: // below 2^-6: a subnormal m*2^-9, m in 0..8
		// Exact: a power-of-two scaling of a float32 that is this small.
		return sign | uint8(math.RoundToEven(float64(math.Float32frombits(a))*512))
	}
	// Normal: keep 3 of the 23 mantissa bits, rounding the 20 dropped
	// ones to nearest even; a carry moves into the exponent, as it should.
	c := (a>>23-127+7)<<3 | a>>20&7
	rem := a & 0xfffff
	if rem > 0x80000 || (rem == 0x80000 && c&1 == 1) {
		c++
	}
	return sign | uint8(min(c, 0x7e))
}
