package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

func f32Bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func randVec(r *rand.Rand, n int, a float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (2*r.Float32() - 1) * a
	}
	return v
}

// moeCase is a MoE layer with its weights as the op sees them and as a
// plain float reference: gate/up [E][inter*hidden], down [E][hidden*inter].
type moeCase struct {
	router              backend.Weight
	experts             backend.Experts
	routerF             []float32
	gateF, upF, downF   [][]float32
	nExp, hidden, inter int
}

// newMoECase builds random experts, quantized (bits > 0, f32 scales so the
// dequantized reference is exact) or dense f32.
func newMoECase(t *testing.T, be *Backend, r *rand.Rand, nExp, hidden, inter, bits int) *moeCase {
	c := &moeCase{nExp: nExp, hidden: hidden, inter: inter}
	c.routerF = randVec(r, nExp*hidden, 0.5)
	var err error
	if c.router, err = be.UploadWeight(&tensor.Host{Name: "router", Shape: []int{nExp, hidden}, DType: tensor.F32, Data: f32Bytes(c.routerF)}); err != nil {
		t.Fatal(err)
	}
	stack := func(name string, out, in int) (backend.Weight, [][]float32) {
		ref := make([][]float32, nExp)
		h := &tensor.Host{Name: name, Shape: []int{nExp, out, in}, DType: tensor.F32}
		if bits > 0 {
			h.DType, h.Quant = tensor.U32, &tensor.Quant{Bits: bits, GroupSize: 64, ScaleDType: tensor.F32}
		}
		for e := range nExp {
			w := randVec(r, out*in, 0.3)
			if bits == 0 {
				ref[e] = w
				h.Data = append(h.Data, f32Bytes(w)...)
				continue
			}
			words, sc, bi, err := quant.Quantize(w, out, in, bits, 64)
			if err != nil {
				t.Fatal(err)
			}
			if ref[e], err = quant.Dequantize(words, sc, bi, out, in, bits, 64); err != nil {
				t.Fatal(err)
			}
			for _, wd := range words {
				h.Data = binary.LittleEndian.AppendUint32(h.Data, wd)
			}
			h.Quant.Scales = append(h.Quant.Scales, f32Bytes(sc)...)
			h.Quant.Biases = append(h.Quant.Biases, f32Bytes(bi)...)
		}
		w, err := be.UploadWeight(h)
		if err != nil {
			t.Fatal(err)
		}
		return w, ref
	}
	c.experts.Gate, c.gateF = stack("gate", inter, hidden)
	c.experts.Up, c.upF = stack("up", inter, hidden)
	c.experts.Down, c.downF = stack("down", hidden, inter)
	return c
}

// reference computes the routed mixture the slow, obvious way: full
// softmax, a stable sort of all experts, each selected expert on its own.
func (c *moeCase) reference(x []float32, n int, p backend.MoEParams) []float32 {
	H, I := c.hidden, c.inter
	out := make([]float32, n*H)
	for r := range n {
		xr := x[r*H : (r+1)*H]
		prob := make([]float64, c.nExp)
		var sum float64
		for e := range prob {
			var l float64
			for j := range H {
				l += float64(xr[j]) * float64(c.routerF[e*H+j])
			}
			prob[e] = l
		}
		m := math.Inf(-1)
		for _, l := range prob {
			m = math.Max(m, l)
		}
		for e := range prob {
			prob[e] = math.Exp(prob[e] - m)
			sum += prob[e]
		}
		idx := make([]int, c.nExp)
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return prob[idx[a]] > prob[idx[b]] })
		var top float64
		for _, e := range idx[:p.TopK] {
			top += prob[e]
		}
		for _, e := range idx[:p.TopK] {
			w := prob[e] / sum
			if p.Renorm {
				w = prob[e] / top
			}
			h := make([]float32, I)
			for i := range I {
				var g, u float64
				for j := range H {
					g += float64(xr[j]) * float64(c.gateF[e][i*H+j])
					u += float64(xr[j]) * float64(c.upF[e][i*H+j])
				}
				gatedAct(h[i:i+1], []float32{float32(g)}, []float32{float32(u)}, p.Act)
			}
			for o := range H {
				var y float64
				for i := range I {
					y += float64(h[i]) * float64(c.downF[e][o*I+i])
				}
				out[r*H+o] += float32(w * y)
			}
		}
	}
	return out
}

func TestMoEMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	be := New(2)
	for _, bits := range []int{0, 4, 8} {
		c := newMoECase(t, be, r, 6, 64, 64, bits)
		for _, p := range []backend.MoEParams{
			{TopK: 1, Renorm: true}, {TopK: 2, Renorm: true}, {TopK: 2, Renorm: false, Act: backend.GELUTanh},
			{TopK: 3, Renorm: false}, {TopK: 6, Renorm: true},
		} {
			const n = 7
			x := randVec(r, n*64, 1)
			xt, dst := be.NewTensor(n, 64), be.NewTensor(n, 64)
			WriteRows(xt, x)
			be.MoE(dst, xt, c.router, c.experts, p)
			want := c.reference(x, n, p)
			got := dst.(*Tensor).Data()
			var md, mr float64
			for i := range want {
				md = math.Max(md, math.Abs(float64(got[i]-want[i])))
				mr = math.Max(mr, math.Abs(float64(want[i])))
			}
			if md/mr > 1e-5 {
				t.Errorf("bits %d %+v: max|diff|/max|ref| = %.2g", bits, p, md/mr)
			}
		}
	}
}

// Equal probabilities go to the lower expert index, as a stable sort would.
func TestRouteTies(t *testing.T) {
	top, w := make([]int, 2), make([]float32, 2)
	route([]float32{1, 3, 3, 0, 3}, make([]float64, 5), top, w, true)
	if top[0] != 1 || top[1] != 2 || w[0] != 0.5 || w[1] != 0.5 {
		t.Fatalf("top %v weights %v", top, w)
	}
}

// benchExperts builds stacked 4-bit (group 64) experts with random codes:
// the values do not matter for speed, only the shapes and the format.
func benchExperts(b *testing.B, be *Backend, r *rand.Rand, nExp, hidden, inter int) backend.Experts {
	mk := func(out, in int) backend.Weight {
		data := make([]byte, nExp*out*in/2)
		for i := 0; i+8 <= len(data); i += 8 {
			binary.LittleEndian.PutUint64(data[i:], r.Uint64())
		}
		groups := nExp * out * in / 64
		sc := make([]float32, groups)
		bi := make([]float32, groups)
		for g := range sc {
			sc[g] = 0.5 / float32(math.Sqrt(float64(in))) * (0.75 + 0.5*r.Float32())
			bi[g] = -7.5 * sc[g]
		}
		w, err := be.UploadWeight(&tensor.Host{Name: "bench", Shape: []int{nExp, out, in}, DType: tensor.U32, Data: data,
			Quant: &tensor.Quant{Bits: 4, GroupSize: 64, Scales: f32Bytes(sc), Biases: f32Bytes(bi), ScaleDType: tensor.F32}})
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	return backend.Experts{Gate: mk(inter, hidden), Up: mk(inter, hidden), Down: mk(hidden, inter)}
}

// BenchmarkMoE shows that a MoE layer's cost follows top-k (the expert
// rows computed per token), not the number of experts: hidden 1024,
// expert intermediate 512, 4-bit experts, a dense router.
//
//	go test ./internal/backend/cpu/ -run '^$' -bench MoE -benchtime 20x
//
// ns/token-expert divides the time by tokens*top-k; touched is how many
// distinct experts the step ran (with 16 tokens, more experts spread the
// same work over more, smaller groups).
func BenchmarkMoE(b *testing.B) {
	const hidden, inter = 1024, 512
	r := rand.New(rand.NewPCG(7, 7))
	be := New(0)
	var experts backend.Experts
	built := 0
	for _, c := range []struct{ nExp, k int }{{8, 2}, {32, 2}, {128, 2}, {64, 1}, {64, 2}, {64, 4}, {64, 8}} {
		if built != c.nExp {
			experts, built = benchExperts(b, be, r, c.nExp, hidden, inter), c.nExp
		}
		router, err := be.UploadWeight(&tensor.Host{Name: "router", Shape: []int{c.nExp, hidden}, DType: tensor.F32,
			Data: f32Bytes(randVec(r, c.nExp*hidden, 0.1))})
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 16} {
			p := backend.MoEParams{TopK: c.k, Renorm: true}
			x, dst := be.NewTensor(n, hidden), be.NewTensor(n, hidden)
			WriteRows(x, randVec(r, n*hidden, 1))
			b.Run(fmt.Sprintf("experts=%d/topk=%d/tokens=%d", c.nExp, c.k, n), func(b *testing.B) {
				for b.Loop() {
					be.MoE(dst, x, router, experts, p)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n*c.k), "ns/token-expert")
				b.ReportMetric(float64(touched(be, x, router, c.k)), "touched")
			})
		}
	}
}

// touched counts the distinct experts x's tokens are routed to.
func touched(be *Backend, x backend.Tensor, router backend.Weight, k int) int {
	xt, rw := x.(*Tensor), router.(*weight)
	nExp := rw.shape[0]
	logits := make([]float32, xt.rows*nExp)
	be.linear(logits, xt.d, xt.rows, rw, 0)
	seen := map[int]bool{}
	top, w, prob := make([]int, k), make([]float32, k), make([]float64, nExp)
	for row := range xt.rows {
		route(logits[row*nExp:(row+1)*nExp], prob, top, w, true)
		for _, e := range top {
			seen[e] = true
		}
	}
	return len(seen)
}
