package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// The decode kernels give the scalar conversions' values: every E4M3 code
// (NaN included, at a scale other than 1) and random bf16 words.
func TestKVDecodeKernels(t *testing.T) {
	if !useAsm {
		t.Skip("no assembly kernels")
	}
	f8 := newKVBuf(backend.KVFP8, 256)
	f8.scale = 0.375
	for c := range 256 {
		f8.f8[c] = uint8(c)
	}
	got := f8.at(make([]float32, 256), 0, 256)
	for c, x := range got {
		want := tensor.E4M3ToF32(uint8(c)) * f8.scale
		if math.Float32bits(x) != math.Float32bits(want) && !(math.IsNaN(float64(x)) && math.IsNaN(float64(want))) {
			t.Errorf("code %#02x: kernel %v, want %v", c, x, want)
		}
	}
	b16 := newKVBuf(backend.KVBF16, 64)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range b16.b16 {
		b16.b16[i] = uint16(rng.Uint32())
	}
	for i, x := range b16.at(make([]float32, 64), 0, 64) {
		if want := tensor.BF16ToF32(b16.b16[i]); math.Float32bits(x) != math.Float32bits(want) {
			t.Errorf("bf16 %#04x: kernel %v, want %v", b16.b16[i], x, want)
		}
	}
}
