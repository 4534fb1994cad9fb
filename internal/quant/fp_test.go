package quant

import (
	"math"
	"math/rand"
	"testing"
)

// Known codes, worked out from the bit layouts (OCP MX spec, E4M3fn).
func TestFPCodes(t *testing.T) {
	e4 := map[uint8]float32{0x00: 0, 0x01: 1.0 / 512, 0x07: 7.0 / 512, 0x08: 1.0 / 64, 0x38: 1, 0x3C: 1.5,
		0x40: 2, 0x7E: 448, 0xB8: -1, 0xFE: -448, 0x30: 0.5}
	for b, want := range e4 {
		if got := E4M3(b); got != want {
			t.Errorf("E4M3(%#x) = %v, want %v", b, got, want)
		}
		if want != 0 && EncodeE4M3(want) != b {
			t.Errorf("EncodeE4M3(%v) = %#x, want %#x", want, EncodeE4M3(want), b)
		}
	}
	if !math.IsNaN(float64(E4M3(0x7F))) {
		t.Error("E4M3(0x7f) is not NaN")
	}
	if EncodeE4M3(1000) != 0x7E || EncodeE4M3(-1000) != 0xFE {
		t.Error("E4M3 does not saturate at 448")
	}
	// 1.0625 lies halfway between 1 (0x38) and 1.125 (0x39): even code.
	if EncodeE4M3(1.0625) != 0x38 || EncodeE4M3(1.1875) != 0x3A {
		t.Error("E4M3 ties do not go to the even code")
	}
	for b, want := range map[uint8]float32{127: 1, 128: 2, 120: 1.0 / 128, 0: float32(math.Ldexp(1, -127))} {
		if got := E8M0(b); got != want {
			t.Errorf("E8M0(%d) = %v, want %v", b, got, want)
		}
	}
	for c, want := range []float32{0, .5, 1, 1.5, 2, 3, 4, 6} {
		if E2M1(uint8(c)) != want || E2M1(uint8(c|8)) != -want {
			t.Errorf("E2M1 code %d", c)
		}
	}
	// Halfway between 4 and 6: MLX's argmin keeps the first (4).
	if EncodeE2M1(5) != 6 || EncodeE2M1(-5) != 14 || EncodeE2M1(0.25) != 0 || EncodeE2M1(9) != 7 {
		t.Error("E2M1 rounding")
	}
}

// The packing: element i is the low nibble of byte i/2 for even i, the
// high nibble for odd i.
func TestFPLayout(t *testing.T) {
	row := []byte{0x21, 0xF7}
	want := []float32{0.5, 1, 6, -6}
	for i, w := range want {
		if got := FPElement(row, i, 4); got != w {
			t.Errorf("element %d = %v, want %v", i, got, w)
		}
	}
}

// Quantize -> dequantize stays within each format's rounding, for every
// mode (E8M0 scales round log2 to nearest, so a group may saturate: mxfp8
// loses more than its 3 mantissa bits suggest, as in MLX).
func TestFPRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const rows, cols = 8, 64
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	for mode, relStep := range map[string]float64{MXFP4: 0.5, NVFP4: 0.35, MXFP8: 0.2} {
		packed, scales, err := QuantizeFP(mode, w, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		dq, err := DequantizeFP(mode, packed, scales, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		var num, den float64
		for i := range w {
			num += float64((dq[i] - w[i]) * (dq[i] - w[i]))
			den += float64(w[i] * w[i])
		}
		if rel := math.Sqrt(num / den); rel > relStep/2 || rel == 0 {
			t.Errorf("%s: relative error %.3g", mode, rel)
		}
	}
	if _, err := DequantizeFP(NVFP4, make([]byte, 8), make([]byte, 1), 1, 24); err == nil {
		t.Error("nvfp4 with 24 inputs (not whole groups of 16) accepted")
	}
}
