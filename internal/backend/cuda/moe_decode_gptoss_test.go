//go:build linux

package cuda

import (
	"math"
	"math/rand"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// gpt-oss-20b's MoE layer: 32 mxfp4 experts of 2880 x 2880, top-4, the
// router 8-bit g64 (mlx's conversion) with an f32 bias, bf16 expert
// biases, the clamped SwiGLU.
const goE, goTopK, goHidden = 32, 4, 2880

// goLayer uploads one gpt-oss layer of random codes (seed apart per copy).
func goLayer(t *testing.T, b *Backend, seed uint64) (router backend.Weight, ex backend.Experts) {
	t.Helper()
	up := func(h *tensor.Host) backend.Weight {
		w, err := b.UploadWeight(h)
		if err != nil {
			t.Fatalf("upload %s: %v", h.Name, err)
		}
		return w
	}
	expert := func(name string, s uint64) backend.Weight {
		h := fpHost(quant.MXFP4, goE*goHidden, goHidden, s)
		h.Name, h.Shape = name, []int{goE, goHidden, goHidden}
		return up(h)
	}
	vec := func(n int, s uint64) []float32 {
		rng, v := rand.New(rand.NewSource(int64(s))), make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64()) * 0.5
		}
		return v
	}
	bias := func(name string, s uint64) backend.Weight {
		return up(&tensor.Host{Name: name, Shape: []int{goE, goHidden}, DType: tensor.BF16, Data: half(vec(goE*goHidden, s), tensor.BF16)})
	}
	router = up(weightHost("q8g64", goE, goHidden, seed))
	ex = backend.Experts{Gate: expert("gate", seed+1), Up: expert("up", seed+2), Down: expert("down", seed+3),
		GateBias: bias("gate_bias", seed+4), UpBias: bias("up_bias", seed+5), DownBias: bias("down_bias", seed+6),
		RouterBias: up(&tensor.Host{Name: "router_bias", Shape: []int{goE}, DType: tensor.F32, Data: f32le(vec(goE, seed+7))})}
	return router, ex
}

// moeGroupedX is the grouped path with the call's extras (the path
// gpt-oss decode took before the _x kernels).
func (b *Backend) moeGroupedX(dst, x backend.Tensor, router backend.Weight, e backend.Experts, p backend.MoEParams) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rw, gw := b.wt(router), b.wt(e.Gate)
	b.moeGrouped(b.tt(dst), b.tt(x), b.tt(x), rw, gw, b.wt(e.Up), b.wt(e.Down), p,
		b.moeExtrasOf(e, p, rw.out, gw.out, rw.in))
}

// TestMoEDecodeGptOss: at gpt-oss-20b's MoE shape, T = 1, 4 and 7 (mxfp4 steps of 8
// tokens and more take the grouped GEMM, plan.MoEGEMMFrom), the
// three _x kernels agree with the grouped path with its extras' launches
// (moe_slot_bias, moe_swiglu), and record only those three.
func TestMoEDecodeGptOss(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	router, ex := goLayer(t, b, 21)
	p := backend.MoEParams{TopK: goTopK, Renorm: true, Act: backend.SwiGLUClamped, Alpha: 1.702, Limit: 7}
	rng := rand.New(rand.NewSource(4))
	want := []string{"moe_router8_bf_x", "moe_gateup4_fp_g64_x", "moe_down_sum4_fp_g64_x"}
	for _, T := range []int{1, 4, 7} {
		x, _, out := goInput(t, b, rng, T)
		var outs [2][]float32
		for k := range outs {
			mdStep(t, b, T)
			if k == 0 {
				b.moeGroupedX(out, x, router, ex, p)
			} else {
				b.MoE(out, x, router, ex, p)
			}
			// The first call grows the split counters, zeroed once by a
			// fill (counters, ops.go): not a launch of the MoE op.
			names := slices.DeleteFunc(b.recorded(), func(n string) bool { return n == "fill_f32" })
			outs[k] = make([]float32, T*goHidden)
			b.ReadRows(out, outs[k])
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if k == 1 && !slices.Equal(names, want) {
				t.Errorf("T=%d: recorded %v, want %v", T, names, want)
			}
		}
		d := normDiff(outs[1], outs[0])
		t.Logf("T=%d: three-launch _x vs grouped with extras: normalised difference %.3g", T, d)
		if d > 1e-5 || math.IsNaN(d) {
			t.Errorf("T=%d: the paths differ by %.3g (bound 1e-5)", T, d)
		}
	}
}

// goInput is T rows of random activations of gpt-oss's width, in a step.
func goInput(t *testing.T, b *Backend, rng *rand.Rand, T int) (x, spare, out backend.Tensor) {
	t.Helper()
	v := make([]float32, T*goHidden)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	xt, err := b.UploadWeight(&tensor.Host{Name: "x", Shape: []int{T, goHidden}, DType: tensor.F32, Data: f32le(v)})
	if err != nil {
		t.Fatal(err)
	}
	mdStep(t, b, T)
	x, spare, out = b.NewTensor(T, goHidden), b.NewTensor(T, goHidden), b.NewTensor(T, goHidden)
	b.Embed(x, xt)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	return x, spare, out
}

// TestBenchMoEDecodeGptOss times gpt-oss-20b's MoE layer at T=1 and 4 on
// the three _x kernels and on the grouped path with its extras (what
// decode ran before), as one replayed graph of 24 layers cycling through 2
// uploaded copies (distinct codes and routers: a layer's 53 MB of experts
// exceed L2 anyway). MLXCEL_CUDA_BENCH=1 enables it; microseconds per layer
// (median of 5 replays).
func TestBenchMoEDecodeGptOss(t *testing.T) {
	o := benchEnabled(t)
	b := newOrSkip(t)
	defer b.Close()
	defer o.print()
	const copies, layers = 2, 24
	type layer struct {
		router backend.Weight
		ex     backend.Experts
	}
	var ls []layer
	for i := range copies {
		r, e := goLayer(t, b, uint64(100+10*i))
		ls = append(ls, layer{r, e})
	}
	p := backend.MoEParams{TopK: goTopK, Renorm: true, Act: backend.SwiGLUClamped, Alpha: 1.702, Limit: 7}
	expertBytes := 3.0 * goHidden * goHidden * (0.5 + 1.0/32)
	rng := rand.New(rand.NewSource(6))
	tm := b.NewTimer()
	for _, T := range []int{1, 4} {
		x, _, out := goInput(t, b, rng, T)
		for _, dec := range []bool{true, false} {
			var ds []time.Duration
			perLayer := 0
			for it := 0; it < 8; it++ {
				mdStep(t, b, T)
				tm.Start()
				for l := range layers {
					w := ls[l%copies]
					if dec {
						b.MoE(out, x, w.router, w.ex, p)
					} else {
						b.moeGroupedX(out, x, w.router, w.ex, p)
					}
					if l == 0 && it == 1 {
						perLayer = len(b.recorded())
					}
				}
				if d := tm.Stop(); it >= 3 { // direct, captured, then replays
					ds = append(ds, d/layers)
				}
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			us := float64(ds[len(ds)/2].Nanoseconds()) / 1e3
			cfg := map[bool]string{true: "moedec3x", false: "grouped10"}[dec]
			wbytes := float64(goE)*goHidden*(1+2.0/64) + float64(min(goE, T*goTopK))*expertBytes
			t.Logf("T=%d %s: %.2f us per layer, %d launches per layer", T, cfg, us, perLayer)
			o.add("moe_decode", cfg, T, "gptoss20b_E32top4_2880_mxfp4_r8", us, wbytes/us/1e3, 0, "MoE layer with biases, clamped SwiGLU")
		}
	}
}
