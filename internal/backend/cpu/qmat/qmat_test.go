package qmat

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sync"
	"testing"

	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// fixture is a quantized weight plus the exact float32 matrix it stands for
// (dequantized with the scales/biases rounded to the stored dtype).
type fixture struct {
	m *Matrix
	w []float32 // [out, in] reference weights
}

func encodeFloats(v []float32, d tensor.DType) ([]byte, []float32) {
	b := make([]byte, len(v)*d.Size())
	back := make([]float32, len(v))
	for i, f := range v {
		switch d {
		case tensor.BF16:
			h := tensor.F32ToBF16(f)
			binary.LittleEndian.PutUint16(b[2*i:], h)
			back[i] = tensor.BF16ToF32(h)
		case tensor.F16:
			h := tensor.F32ToF16(f)
			binary.LittleEndian.PutUint16(b[2*i:], h)
			back[i] = tensor.F16ToF32(h)
		default:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
			back[i] = f
		}
	}
	return b, back
}

func newFixture(t testing.TB, rng *rand.Rand, out, in, bits, group int, d tensor.DType) fixture {
	t.Helper()
	src := make([]float32, out*in)
	for i := range src {
		src[i] = float32(rng.NormFloat64()) * 0.05
	}
	words, scales, biases, err := quant.Quantize(src, out, in, bits, group)
	if err != nil {
		t.Fatal(err)
	}
	packed := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(packed[4*i:], w)
	}
	sb, s32 := encodeFloats(scales, d)
	bb, b32 := encodeFloats(biases, d)
	w, err := quant.Dequantize(words, s32, b32, out, in, bits, group)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(out, in, bits, group, packed, sb, bb, d)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{m, w}
}

func randX(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// checkMul compares out against a float64 matmul with the reference
// weights. The error of each output is measured relative to sum|x*w|, the
// natural scale of float32 rounding in a dot product; the bound allows for
// a few thousand float32 accumulations.
func checkMul(t *testing.T, f fixture, x, out []float32, nRows, o0, o1 int, tag string) float64 {
	t.Helper()
	m := f.m
	worst := 0.0
	for r := 0; r < nRows; r++ {
		for o := o0; o < o1; o++ {
			var ref, mag float64
			for i := 0; i < m.In; i++ {
				p := float64(x[r*m.In+i]) * float64(f.w[o*m.In+i])
				ref += p
				mag += math.Abs(p)
			}
			rel := math.Abs(float64(out[r*m.Out+o])-ref) / max(mag, 1e-30)
			worst = max(worst, rel)
			if rel > 2e-6 {
				t.Fatalf("%s: out[%d][%d] = %v, want %v (rel err %.3g)", tag, r, o, out[r*m.Out+o], ref, rel)
			}
		}
	}
	return worst
}

// paths runs fn with the assembly path (where available) and the Go path.
func paths(t *testing.T, fn func(t *testing.T)) {
	saved := useAsm
	defer func() { useAsm = saved }()
	for _, asm := range []bool{true, false} {
		if asm && !asmAvailable {
			continue
		}
		useAsm = asm
		name := "go"
		if asm {
			name = "asm"
		}
		t.Run(name, fn)
	}
}

func TestMulAllFormats(t *testing.T) {
	paths(t, func(t *testing.T) {
		rng := rand.New(rand.NewSource(1))
		for _, bits := range []int{2, 3, 4, 5, 6, 8} {
			worst := 0.0
			for _, group := range []int{32, 64, 128} {
				for _, d := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
					// Odd output count and an odd number of groups.
					out, in := 13, 3*group
					f := newFixture(t, rng, out, in, bits, group, d)
					for _, nRows := range []int{1, 2, 3, 5, 8, 16, 17} {
						x := randX(rng, nRows*in)
						res := make([]float32, nRows*out)
						f.m.Mul(res, x, nRows, 3)
						worst = max(worst, checkMul(t, f, x, res, nRows, 0, out,
							fmt.Sprintf("bits %d group %d %s rows %d", bits, group, d, nRows)))
					}
				}
			}
			t.Logf("bits %d: max error relative to sum|x*w|: %.3g", bits, worst)
		}
	})
}

func TestMulShapes(t *testing.T) {
	paths(t, func(t *testing.T) {
		rng := rand.New(rand.NewSource(2))
		shapes := [][2]int{{1, 32}, {1, 4096}, {7, 32}, {64, 640}, {257, 1024}, {33, 4160}}
		for _, bits := range []int{4, 8, 3} {
			for _, s := range shapes {
				group := 32
				if s[1]%64 == 0 {
					group = 64
				}
				f := newFixture(t, rng, s[0], s[1], bits, group, tensor.BF16)
				for _, nRows := range []int{1, 4, 11} {
					for _, threads := range []int{1, 2, 5} {
						x := randX(rng, nRows*s[1])
						res := make([]float32, nRows*s[0])
						f.m.Mul(res, x, nRows, threads)
						checkMul(t, f, x, res, nRows, 0, s[0],
							fmt.Sprintf("bits %d shape %v rows %d threads %d", bits, s, nRows, threads))
					}
				}
			}
		}
	})
}

func TestMulRangeTouchesOnlyItsColumns(t *testing.T) {
	paths(t, func(t *testing.T) {
		rng := rand.New(rand.NewSource(3))
		f := newFixture(t, rng, 40, 256, 4, 64, tensor.BF16)
		nRows := 3
		x := randX(rng, nRows*256)
		res := make([]float32, nRows*40)
		for i := range res {
			res[i] = 12345
		}
		f.m.MulRange(res, x, nRows, 5, 22)
		checkMul(t, f, x, res, nRows, 5, 22, "range")
		for r := 0; r < nRows; r++ {
			for o := 0; o < 40; o++ {
				if (o < 5 || o >= 22) && res[r*40+o] != 12345 {
					t.Fatalf("column %d of row %d was written", o, r)
				}
			}
		}
	})
}

func TestDequantRow(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, d := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
			f := newFixture(t, rng, 5, 256, bits, 64, d)
			dst := make([]float32, 256)
			for o := 0; o < 5; o++ {
				f.m.DequantRow(dst, o)
				for i, v := range dst {
					if v != f.w[o*256+i] {
						t.Fatalf("bits %d %s row %d [%d] = %v, want %v", bits, d, o, i, v, f.w[o*256+i])
					}
				}
			}
		}
	}
}

func TestWeightBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	f := newFixture(t, rng, 64, 512, 4, 64, tensor.BF16)
	// 64*512/2 packed bytes + 64*8 groups * (scale+bias) * 2 bytes.
	if got, want := f.m.WeightBytes(), int64(64*256+64*8*4); got != want {
		t.Fatalf("WeightBytes = %d, want %d", got, want)
	}
}

func TestNewRejects(t *testing.T) {
	packed := make([]byte, 4*64/2)
	meta := make([]byte, 4*2)
	if _, err := New(4, 64, 4, 64, packed, meta, meta, tensor.BF16); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name                string
		out, in, bits, grp  int
		packed, scales, bia []byte
		d                   tensor.DType
	}{
		{"bits", 4, 64, 7, 64, packed, meta, meta, tensor.BF16},
		{"group", 4, 64, 4, 48, packed, meta, meta, tensor.BF16},
		{"packed len", 4, 64, 4, 64, packed[1:], meta, meta, tensor.BF16},
		{"scales len", 4, 64, 4, 64, packed, meta[2:], meta, tensor.BF16},
		{"dtype", 4, 64, 4, 64, packed, meta, meta, tensor.I32},
	}
	for _, c := range cases {
		if _, err := New(c.out, c.in, c.bits, c.grp, c.packed, c.scales, c.bia, c.d); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

// TestMulPrepared: one Prep shared by several column ranges (as the CPU
// backend's workers share it) gives the same result as Mul, and a matrix
// of another shape refuses it.
func TestMulPrepared(t *testing.T) {
	paths(t, func(t *testing.T) {
		rng := rand.New(rand.NewSource(4))
		f := newFixture(t, rng, 70, 192, 4, 64, tensor.BF16)
		for _, nRows := range []int{1, 3, 9} {
			x := randX(rng, nRows*192)
			res := make([]float32, nRows*70)
			p := f.m.Prepare(x, nRows)
			for o := 0; o < 70; o += 16 {
				f.m.MulPrepared(p, res, o, min(o+16, 70))
			}
			p.Release()
			checkMul(t, f, x, res, nRows, 0, 70, fmt.Sprintf("prepared rows %d", nRows))
		}
		other := newFixture(t, rng, 8, 256, 4, 64, tensor.BF16)
		p := f.m.Prepare(randX(rng, 192), 1)
		defer func() {
			if recover() == nil {
				t.Error("a Prep of another shape was accepted")
			}
		}()
		other.m.MulPrepared(p, make([]float32, 8), 0, 8)
	})
}

// TestMulManyRows covers the many-row path (gemm.go): row counts around
// whole strips, output counts that are not whole strips or blocks, and an
// input dim split into K-blocks; and checks that a row's result does not
// depend on the other rows of the call.
func TestMulManyRows(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for _, c := range []struct{ out, in, bits, group int }{
		{13, 192, 4, 64}, {50, 2560, 4, 64}, {31, 2560, 8, 128}, {24, 96, 8, 32}, {7, 128, 4, 32},
	} {
		for _, d := range []tensor.DType{tensor.BF16, tensor.F32} {
			f := newFixture(t, rng, c.out, c.in, c.bits, c.group, d)
			for _, nRows := range []int{gemmMinRows, gemmMinRows + 1, gemmMinRows + 15, 2*gemmMinRows + 3} {
				x := randX(rng, nRows*c.in)
				res := make([]float32, nRows*c.out)
				f.m.Mul(res, x, nRows, 3)
				tag := fmt.Sprintf("%dx%d q%d g%d %s rows %d", c.out, c.in, c.bits, c.group, d, nRows)
				checkMul(t, f, x, res, nRows, 0, c.out, tag)
				// Packing spread over goroutines gives the same panel.
				par := func(n int, fn func(i int)) {
					var wg sync.WaitGroup
					for i := range n {
						wg.Add(1)
						go func() { defer wg.Done(); fn(i) }()
					}
					wg.Wait()
				}
				p := f.m.PrepareWith(x, nRows, par)
				res2 := make([]float32, nRows*c.out)
				f.m.MulPrepared(p, res2, 0, c.out)
				p.Release()
				if !slices.Equal(res, res2) {
					t.Fatalf("%s: parallel packing changed the result", tag)
				}
				// The last gemmMinRows rows alone give bit-identical rows.
				const n = gemmMinRows
				tail := make([]float32, n*c.out)
				f.m.Mul(tail, x[(nRows-n)*c.in:], n, 1)
				for i, v := range tail {
					if w := res[(nRows-n)*c.out+i]; v != w {
						t.Fatalf("%s: element %d is %g in a %d-row call, %g in the full call", tag, i, v, n, w)
					}
				}
			}
		}
	}
}
