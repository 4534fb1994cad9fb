//go:build amd64 && !purego

package qmat

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// BenchmarkKernel times the bare assembly kernels on an L1-resident
// problem (8 output rows x 1024 inputs) and reports multiply-adds per
// nanosecond: the compute ceiling of each kernel, without memory traffic.
// rows1x2 is the paired one-row kernel used for token generation.
//
//	go test -run xxx -bench Kernel ./internal/backend/cpu/qmat/
func BenchmarkKernel(b *testing.B) {
	if !asmAvailable {
		b.Skip("no AVX2/FMA")
	}
	const nout, in = 8, 1024
	for _, group := range []int{32, 64, 128} {
		for _, bits := range []int{2, 3, 4, 5, 6, 8} {
			rng := rand.New(rand.NewSource(1))
			f := newFixture(b, rng, nout, in, bits, group, tensor.BF16)
			// 0 is the pair kernel; then every unrolled row count.
			for _, rows := range append([]int{0}, asmRows(bits)...) {
				n := max(rows, 1)
				x := randX(rng, n*in)
				out := make([]float32, n*nout)
				p := f.m.prepare(x, n)
				var scratch [2 * maxKG]float32
				a := kargs{groups: f.m.groups, iters: group / 32, nout: nout, outStride: nout * 4,
					metaStride: f.m.metaStride, biasOff: f.m.gpad * 2, flags: flagBias,
					gsum: &p.gsum[0], gp8: f.m.gpad / 8, wstride: f.m.rowBytes, scratch: &scratch[0]}
				name := fmt.Sprintf("q%d_g%d_rows%d", bits, group, rows)
				if rows == 0 {
					name = fmt.Sprintf("q%d_g%d_rows1x2", bits, group)
				}
				b.Run(name, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						callKernel(bits, 0, rows, &f.m.packed[0], &f.m.meta[0], &p.panel[0], &out[0], &a)
					}
					b.ReportMetric(float64(nout*in*n)*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "MAC/ns")
				})
				p.release()
			}
		}
	}
}
