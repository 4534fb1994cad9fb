//go:build linux

package cuda

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// Qwen3-30B-A3B's MoE layer: 128 experts, top-8, hidden 2048, expert
// width 768, experts 4-bit g64 with bf16 scales, the router 8-bit g64.
const mdE, mdTopK, mdHidden, mdInter = 128, 8, 2048, 768

// mdLayer is one MoE layer's weights (random bytes: the tests compare the
// two GPU paths, the conformance suite compares with the CPU).
type mdLayer struct {
	router backend.Weight
	ex     backend.Experts
	norm   backend.Weight
}

// mdHosts builds the host tensors of one layer's experts, shared by every
// uploaded copy (the copies differ by their routers).
func mdHosts() (gate, up, down *tensor.Host) {
	qe := func(name string, out, in int, seed uint64) *tensor.Host {
		ng := mdE * out * in / 64
		sc, bi := make([]float32, ng), make([]float32, ng)
		for i := range sc {
			sc[i] = 0.004 + 0.004*float32(i%7)/7
			bi[i] = -8 * sc[i]
		}
		return &tensor.Host{Name: name, Shape: []int{mdE, out, in}, Data: rnd(mdE*out*in/2, seed),
			Quant: &tensor.Quant{Bits: 4, GroupSize: 64, Scales: half(sc, tensor.BF16), Biases: half(bi, tensor.BF16), ScaleDType: tensor.BF16}}
	}
	return qe("gate", mdInter, mdHidden, 1), qe("up", mdInter, mdHidden, 2), qe("down", mdHidden, mdInter, 3)
}

func mdUpload(t *testing.T, b *Backend, gate, up, down *tensor.Host, seed uint64) mdLayer {
	t.Helper()
	up1 := func(h *tensor.Host) backend.Weight {
		w, err := b.UploadWeight(h)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	nw := make([]float32, mdHidden)
	for i := range nw {
		nw[i] = 0.8 + 0.4*float32(i%5)/5
	}
	return mdLayer{router: up1(weightHost("q8g64", mdE, mdHidden, seed)),
		ex:   backend.Experts{Gate: up1(gate), Up: up1(up), Down: up1(down)},
		norm: up1(bf16Host("norm", []int{mdHidden}, nw))}
}

// mdStep begins a step of T tokens 0..T-1.
func mdStep(t *testing.T, b *Backend, T int) {
	t.Helper()
	batch := &backend.Batch{Tokens: make([]int32, T), Positions: make([]int32, T),
		Seqs: []backend.SeqSlice{{Start: 0, Len: T, Blocks: []int32{0}}}}
	for j := range T {
		batch.Tokens[j], batch.Positions[j] = int32(j), int32(j)
	}
	if err := b.BeginStep(batch); err != nil {
		t.Fatal(err)
	}
}

func normDiff(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(num / max(den, 1e-30))
}

// groupedMatches fails t when the grouped MoE path's output differs from
// the per-token path's by more than 1e-2 (normalised), or the reference is
// all zeros.
func groupedMatches(t *testing.T, T int, grouped, perToken []float32) {
	t.Helper()
	var den float64
	for _, v := range perToken {
		den += float64(v) * float64(v)
	}
	rel := normDiff(grouped, perToken)
	t.Logf("T=%d grouped vs per-token: normalised difference %.3g", T, rel)
	if rel > 1e-2 || math.IsNaN(rel) || den == 0 {
		t.Errorf("T=%d: grouped path differs from the per-token path by %.3g (norm %.3g)", T, rel, math.Sqrt(den))
	}
}

// recorded names the launches recorded since the step began.
func (b *Backend) recorded() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range b.rec.ls {
		name := "?"
		for n, f := range b.fns {
			if f == l.fn {
				name = n
			}
		}
		out = append(out, name)
	}
	return out
}

// moeSeven records the MoE op on the seven-launch path, whatever the shape
// (the reference the three-launch path is checked against).
func (b *Backend) moeSeven(dst, x backend.Tensor, router backend.Weight, e backend.Experts, p backend.MoEParams) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.moeGrouped(b.tt(dst), b.tt(x), b.tt(x), b.wt(router), b.wt(e.Gate), b.wt(e.Up), b.wt(e.Down), p, moeExtras{})
}

// TestMoEDecode checks the three-launch MoE path on Qwen3-30B-A3B's layer
// shape: a norm and the MoE record exactly the norm and the three
// moe_decode kernels; the output agrees with the seven-launch path; and
// repeated steps (direct run, graph capture, replays, each running the
// layer thrice: the ticket counters must be left zero) give bit-identical
// results.
func TestMoEDecode(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	gate, up, down := mdHosts()
	ly := mdUpload(t, b, gate, up, down, 11)
	p := backend.MoEParams{TopK: mdTopK, Renorm: true, Act: backend.SiLU}
	rng := rand.New(rand.NewSource(3))
	for _, T := range []int{1, 4} {
		h, xn, out := mdInput(t, b, rng, T)
		// Run 0: the seven-launch path; runs 1-4: the three-launch path.
		// Run 1 may grow the counters (a fill between its first norm and
		// router, which then stay apart); from there the same launches
		// run directly, are captured in a graph, then replayed, and runs
		// 3 and 4 must repeat run 2 bit for bit.
		var ref, refN, first []float32
		for run := range 5 {
			mdStep(t, b, T)
			b.mu.Lock()
			b.fill(b.tt(out).ptr, float32(math.NaN()), T*mdHidden)
			b.fill(b.tt(xn).ptr, float32(math.NaN()), T*mdHidden)
			b.mu.Unlock()
			if err := b.Sync(); err != nil { // the fills are not part of the recorded ops
				t.Fatal(err)
			}
			for range 3 { // the same layer thrice: enough launches for a graph (minGraphLaunches)
				b.RMSNorm(xn, h, ly.norm, 1e-6)
				if run == 0 {
					b.moeSeven(out, xn, ly.router, ly.ex, p)
				} else {
					b.MoE(out, xn, ly.router, ly.ex, p)
				}
			}
			names := b.recorded()
			got, gotN := make([]float32, T*mdHidden), make([]float32, T*mdHidden)
			b.ReadRows(out, got)
			b.ReadRows(xn, gotN)
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			t.Logf("T=%d run %d: %d launches %v", T, run, len(names), names)
			for i, v := range got {
				if math.IsNaN(float64(v)) || math.IsNaN(float64(gotN[i])) {
					t.Fatalf("T=%d run %d: element %d not written (out %v, normed x %v)", T, run, i, v, gotN[i])
				}
			}
			switch run {
			case 0:
				ref, refN = got, gotN
				continue
			case 1:
				d, dn := normDiff(got, ref), normDiff(gotN, refN)
				t.Logf("T=%d: three-launch vs seven-launch path: output %.3g, normed x %.3g", T, d, dn)
				if d > 1e-5 || dn > 1e-6 {
					t.Errorf("T=%d: the paths differ: output %.3g (bound 1e-5), normed x %.3g (bound 1e-6)", T, d, dn)
				}
				continue
			}
			var want []string
			for range 3 {
				want = append(want, "rmsnorm", "moe_router8_bf", "moe_gateup4_bf_g64_o6", "moe_down_acc4_bf")
			}
			if strings.Join(names, " ") != strings.Join(want, " ") {
				t.Errorf("T=%d run %d: launches %v, want %v", T, run, names, want)
			}
			if run == 2 {
				first = got
			}
			for i := range got {
				if got[i] != first[i] {
					t.Fatalf("T=%d run %d (graph capture or replay): element %d is %v, first run %v", T, run, i, got[i], first[i])
				}
			}
		}
		c, r, _, f, lastErr := b.GraphStats()
		t.Logf("graphs: %d captured, %d replays, %d failed (%v)", c, r, f, lastErr)
		if b.graphs.on && (r == 0 || f > 0) {
			t.Errorf("graph path not exercised: %d captures, %d replays, %d failures (%v)", c, r, f, lastErr)
		}
	}
}

// TestBenchMoEDecode times MoE layers of Qwen3-30B-A3B's shape at T=1 and
// T=4 (each layer: the RMSNorm that feeds it, then the MoE op), on the
// three-launch path and the seven-launch one, as one
// replayed graph of 48 layers cycling through 4 uploaded copies (distinct
// routers, so the 4 copies' experts do not stay in L2 from one layer to
// the next). MLXCEL_CUDA_BENCH=1 enables it; it prints microseconds per
// layer (the median of 5 replays) and the outputs' agreement.
func TestBenchMoEDecode(t *testing.T) {
	o := benchEnabled(t)
	b := newOrSkip(t)
	defer b.Close()
	defer o.print()
	const copies, layers = 4, 48
	gate, up, down := mdHosts()
	var ls []mdLayer
	for i := range copies {
		ls = append(ls, mdUpload(t, b, gate, up, down, uint64(100+i)))
	}
	expertBytes := 3.0 * mdInter * mdHidden * (0.5 + 4.0/64)
	routerBytes := float64(mdE) * mdHidden * (1 + 4.0/64)
	p := backend.MoEParams{TopK: mdTopK, Renorm: true, Act: backend.SiLU}
	rng := rand.New(rand.NewSource(5))
	tm := b.NewTimer()
	for _, T := range []int{1, 4} {
		h, xn, out := mdInput(t, b, rng, T)
		var outs [2][]float32
		for k, dec := range []bool{true, false} {
			var ds []time.Duration
			perLayer := 0
			for it := 0; it < 8; it++ {
				mdStep(t, b, T) // rewinds the arena: the same scratch, so the same graph
				tm.Start()
				for l := range layers {
					w := ls[l%copies]
					b.RMSNorm(xn, h, w.norm, 1e-6)
					if dec {
						b.MoE(out, xn, w.router, w.ex, p)
					} else {
						b.moeSeven(out, xn, w.router, w.ex, p)
					}
					if l == 0 && it == 1 { // (run 0 may grow the counters: one fill more)
						perLayer = len(b.recorded())
					}
				}
				d := tm.Stop()
				if it >= 3 { // direct, captured (one run later if run 0 grew the counters), then replays
					ds = append(ds, d/layers)
				}
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			us := float64(ds[len(ds)/2].Nanoseconds()) / 1e3
			outs[k] = make([]float32, T*mdHidden)
			b.ReadRows(out, outs[k])
			cfg := map[bool]string{true: "moedec3", false: "grouped7"}[dec]
			wbytes := routerBytes + float64(min(mdE, T*mdTopK))*expertBytes
			t.Logf("T=%d %s: %.2f us per layer (norm + MoE), %d launches per layer", T, cfg, us, perLayer)
			o.add("moe_decode", cfg, T, "E128top8_2048x768_q4g64_r8", us, wbytes/us/1e3, 0,
				fmt.Sprintf("norm+MoE layer; %d launches; bytes: distinct-expert bound", perLayer))
		}
		d := normDiff(outs[0], outs[1])
		t.Logf("T=%d three-launch vs seven-launch: normalised difference %.3g", T, d)
		if d > 1e-5 || math.IsNaN(d) {
			t.Errorf("T=%d: the paths differ by %.3g", T, d)
		}
	}
	c, r, _, f, lastErr := b.GraphStats()
	t.Logf("graphs: %d captured, %d replays, %d failed (%v)", c, r, f, lastErr)
}

// mdInput begins a T-token step and returns a random input row set h
// (embedded from an uploaded table) and two output tensors.
func mdInput(t *testing.T, b *Backend, rng *rand.Rand, T int) (h, xn, out backend.Tensor) {
	t.Helper()
	hv := make([]float32, T*mdHidden)
	for i := range hv {
		hv[i] = float32(rng.NormFloat64())
	}
	xt, err := b.UploadWeight(&tensor.Host{Name: "x", Shape: []int{T, mdHidden}, DType: tensor.F32, Data: f32le(hv)})
	if err != nil {
		t.Fatal(err)
	}
	mdStep(t, b, T)
	h, xn, out = b.NewTensor(T, mdHidden), b.NewTensor(T, mdHidden), b.NewTensor(T, mdHidden)
	b.Embed(h, xt)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	return h, xn, out
}
