package qmat

import (
	"fmt"
	"math/rand"
	"runtime"
	"testing"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// The benchmarks report weight bytes per second (b.SetBytes(WeightBytes)),
// directly comparable with BenchmarkCopy, which copies a buffer the size of
// the 4-bit packed weight: token generation is a stream over the weights,
// so the copy rate is the bar to measure the kernel against.
//
//	go test -run xxx -bench . -benchtime 2s ./internal/backend/cpu/qmat/

const benchN = 4096

func benchMul(b *testing.B, bits, group, nRows int, asm bool) {
	if asm && !asmAvailable {
		b.Skip("no AVX2/FMA")
	}
	saved := useAsm
	useAsm = asm
	defer func() { useAsm = saved }()
	rng := rand.New(rand.NewSource(1))
	m := newFixture(b, rng, benchN, benchN, bits, group, tensor.BF16).m
	x := randX(rng, nRows*benchN)
	out := make([]float32, nRows*benchN)
	threads := runtime.NumCPU()
	// Building the fixture leaves ~200 MB of garbage; collect it now so a
	// GC cycle does not run concurrently with the timed loop.
	runtime.GC()
	m.Mul(out, x, nRows, threads) // warm the pools
	b.SetBytes(m.WeightBytes())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Mul(out, x, nRows, threads)
	}
}

func BenchmarkMul(b *testing.B) {
	for _, c := range []struct{ bits, group, rows int }{
		{4, 64, 1}, {4, 64, 16}, {8, 64, 1}, {8, 64, 16},
		// For reference: widths with one-row kernels only.
		{6, 64, 1}, {3, 64, 1},
	} {
		b.Run(fmt.Sprintf("q%d_g%d_rows%d", c.bits, c.group, c.rows), func(b *testing.B) {
			benchMul(b, c.bits, c.group, c.rows, true)
		})
	}
}

// BenchmarkMulGo is the pure-Go fallback, for reference.
func BenchmarkMulGo(b *testing.B) {
	b.Run("q4_g64_rows1", func(b *testing.B) { benchMul(b, 4, 64, 1, false) })
}

func BenchmarkCopy(b *testing.B) {
	size := benchN * benchN / 2 // 4-bit packed 4096x4096
	src := make([]byte, size)
	dst := make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	runtime.GC()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		copy(dst, src)
	}
}

// BenchmarkQwen05Shapes: one activation row through the matrices of
// Qwen2.5-0.5B (4-bit, group 64, bf16 scales), the decode-time shapes,
// on one thread (their rate per core, without scheduling effects).
func BenchmarkQwen05Shapes(b *testing.B) {
	for _, s := range [][2]int{{896, 896}, {128, 896}, {4864, 896}, {896, 4864}, {151936, 896}} {
		b.Run(fmt.Sprintf("%dx%d", s[0], s[1]), func(b *testing.B) {
			rng := rand.New(rand.NewSource(1))
			m := newFixture(b, rng, s[0], s[1], 4, 64, tensor.BF16).m
			x := randX(rng, s[1])
			out := make([]float32, s[0])
			runtime.GC()
			m.Mul(out, x, 1, 1)
			b.SetBytes(m.WeightBytes())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.Mul(out, x, 1, 1)
			}
		})
	}
}

// BenchmarkQwen05Head2: the LM head (151936x896, 76 MB: from memory) on
// two threads, against BenchmarkCopy's memory rate.
func BenchmarkQwen05Head2(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	m := newFixture(b, rng, 151936, 896, 4, 64, tensor.BF16).m
	x := randX(rng, 896)
	out := make([]float32, 151936)
	runtime.GC()
	m.Mul(out, x, 1, 2)
	b.SetBytes(m.WeightBytes())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Mul(out, x, 1, 2)
	}
}

// BenchmarkGemm: the many-row path (gemm.go) on Qwen2.5-0.5B's MLP shapes
// with a 512-row prompt, one thread, in multiply-adds per nanosecond (the
// FMA peak of one core here is about 54).
func BenchmarkGemm(b *testing.B) {
	for _, s := range [][3]int{{4864, 896, 512}, {896, 4864, 512}, {4864, 896, 64}, {4864, 896, 128}, {4864, 896, 2048}, {896, 4864, 2048}} {
		b.Run(fmt.Sprintf("%dx%d_rows%d", s[0], s[1], s[2]), func(b *testing.B) {
			rng := rand.New(rand.NewSource(1))
			m := newFixture(b, rng, s[0], s[1], 4, 64, tensor.BF16).m
			x := randX(rng, s[2]*s[1])
			out := make([]float32, s[2]*s[0])
			runtime.GC()
			m.Mul(out, x, s[2], 1)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.Mul(out, x, s[2], 1)
			}
			b.ReportMetric(float64(s[0]*s[1]*s[2])*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "MAC/ns")
		})
	}
}
