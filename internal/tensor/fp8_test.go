package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The OCP 8-bit floating point spec's E4M3 values: each code's value,
// and the conversion back.
func TestE4M3Codes(t *testing.T) {
	known := map[uint8]float32{
		0x00: 0, 0x01: 1.0 / 512, 0x07: 7.0 / 512, 0x08: 1.0 / 64, 0x38: 1, 0x39: 1.125, 0x40: 2,
		0x77: 240, 0x78: 256, 0x7e: 448, 0xb8: -1, 0xfe: -448,
	}
	for c, want := range known {
		if got := E4M3ToF32(c); got != want {
			t.Errorf("code %#02x = %v, want %v", c, got, want)
		}
	}
	if v := E4M3ToF32(0x80); v != 0 || !math.Signbit(float64(v)) {
		t.Errorf("code 0x80 = %v, want -0", v)
	}
	for c := range 256 {
		v := E4M3ToF32(uint8(c))
		if c&0x7f == 0x7f {
			if !math.IsNaN(float64(v)) {
				t.Errorf("code %#02x = %v, want NaN", c, v)
			}
			continue
		}
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || math.Abs(float64(v)) > E4M3Max {
			t.Errorf("code %#02x = %v, want finite within 448", c, v)
		}
		if got := F32ToE4M3(v); got != uint8(c) {
			t.Errorf("code %#02x (%v) encodes back to %#02x", c, v, got)
		}
	}
}

// Rounding is to nearest, ties to the even code; past 448 it saturates;
// NaN stays NaN.
func TestE4M3Rounding(t *testing.T) {
	cases := []struct {
		in   float32
		want uint8
	}{
		{1.0625, 0x38},     // halfway 1 and 1.125: even (1)
		{1.1875, 0x3a},     // halfway 1.125 and 1.25: even (1.25)
		{1.0626, 0x39},     // just past halfway
		{0.5 / 512, 0x00},  // halfway 0 and the least subnormal: 0
		{1.5 / 512, 0x02},  // halfway 1 and 2 subnormal units: 2
		{7.5 / 512, 0x08},  // halfway the largest subnormal and 2^-6
		{0.1 / 512, 0x00},  // underflow
		{-0.1 / 512, 0x80}, // underflow keeps the sign
		{432, 0x7e},        // halfway 416 and 448: even (448)
		{447, 0x7e},        // nearest
		{448, 0x7e},        // max
		{464, 0x7e},        // saturates, no 480
		{1e9, 0x7e},        // saturates
		{-1e9, 0xfe},       // saturates
		{float32(math.Inf(1)), 0x7e},
		{float32(math.Inf(-1)), 0xfe},
		{float32(math.NaN()), 0x7f},
		{-float32(math.NaN()), 0xff},
	}
	for _, c := range cases {
		if got := F32ToE4M3(c.in); got != c.want {
			t.Errorf("F32ToE4M3(%v) = %#02x, want %#02x", c.in, got, c.want)
		}
	}
}

// Any float32 encodes to the nearest code (ties even), as a search over
// the 254 finite values finds it.
func TestE4M3Nearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		x := float32(math.Ldexp(rng.NormFloat64(), rng.IntN(24)-14))
		if math.Abs(float64(x)) > E4M3Max {
			continue
		}
		best, bestD := -1, math.Inf(1)
		for c := range 256 {
			v := float64(E4M3ToF32(uint8(c)))
			if math.IsNaN(v) || math.Signbit(v) != math.Signbit(float64(x)) {
				continue
			}
			d := math.Abs(v - float64(x))
			if d < bestD || (d == bestD && c&1 == 0) {
				best, bestD = c, d
			}
		}
		if got := F32ToE4M3(x); int(got) != best {
			t.Fatalf("F32ToE4M3(%v) = %#02x (%v), nearest is %#02x (%v)", x, got, E4M3ToF32(got), best, E4M3ToF32(uint8(best)))
		}
	}
}
