package qmat

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/mlxcel/mlxcel/internal/quant"
)

// FPMatrix against the reference dequantization of package quant and a
// plain f32 product, for every mode and 1, 3 and 70 activation rows (70:
// mxfp4 through the converted affine gemm path where the CPU has it).
func TestFPMatrixMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	const out, in = 40, 96
	w := make([]float32, out*in)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	for _, mode := range []string{quant.MXFP4, quant.NVFP4, quant.MXFP8} {
		packed, scales, err := quant.QuantizeFP(mode, w, out, in)
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := quant.DequantizeFP(mode, packed, scales, out, in)
		m, err := NewFP(mode, out, in, packed, scales)
		if err != nil {
			t.Fatal(err)
		}
		row := make([]float32, in)
		for o := range out {
			m.DequantRow(row, o)
			for i, v := range row {
				if v != ref[o*in+i] {
					t.Fatalf("%s: row %d element %d = %v, reference %v", mode, o, i, v, ref[o*in+i])
				}
			}
		}
		for _, rows := range []int{1, 3, 70} {
			x := make([]float32, rows*in)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			got := make([]float32, rows*out)
			// Two column ranges, as the backend hands them to workers.
			p := m.PrepareWith(x, rows, nil)
			m.MulPrepared(p, got, 0, 24)
			m.MulPrepared(p, got, 24, out)
			p.Release()
			for r := range rows {
				for o := range out {
					var want, mag float64
					for i := range in {
						p := float64(x[r*in+i]) * float64(ref[o*in+i])
						want += p
						mag += math.Abs(p)
					}
					if d := math.Abs(float64(got[r*out+o]) - want); d > 2e-6*mag {
						t.Fatalf("%s rows %d: out[%d][%d] = %v, want %v", mode, rows, r, o, got[r*out+o], want)
					}
				}
			}
		}
	}
	if _, err := NewFP(quant.MXFP4, out, in, make([]byte, 10), nil); err == nil {
		t.Error("short packed data accepted")
	}
}

// BenchmarkFPMatrix: one-row (decode), 8- and 64-row products of a
// [2880, 2880] weight (gpt-oss-20b's hidden size), one thread; bytes/s
// are weight bytes read.
func BenchmarkFPMatrix(b *testing.B) {
	const out, in = 2880, 2880
	rng := rand.New(rand.NewSource(1))
	w := make([]float32, out*in)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	for _, mode := range []string{quant.MXFP4, quant.MXFP8} {
		packed, scales, _ := quant.QuantizeFP(mode, w, out, in)
		m, _ := NewFP(mode, out, in, packed, scales)
		for _, rows := range []int{1, 8, 64} {
			x := make([]float32, rows*in)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			y := make([]float32, rows*out)
			for _, asm := range []bool{true, false} {
				b.Run(fmt.Sprintf("%s/rows=%d/asm=%v", mode, rows, asm), func(b *testing.B) {
					if asm && !useAsm {
						b.Skip("no assembly kernels")
					}
					saved := useAsm
					useAsm = asm
					defer func() { useAsm = saved }()
					b.SetBytes(m.WeightBytes())
					for range b.N {
						p := m.PrepareWith(x, rows, nil)
						m.MulPrepared(p, y, 0, out)
						p.Release()
					}
				})
			}
		}
	}
}
