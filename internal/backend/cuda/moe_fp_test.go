//go:build linux

package cuda

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// gptOssMoE is one made-up gpt-oss MoE block for recording without a
// device: E experts of hidden x inter in mode, top-4, a bf16 router with
// an f32 bias, bf16 gate, up and down biases, the clamped SwiGLU.
type gptOssMoE struct {
	rw *weight
	ex backend.Experts
	p  backend.MoEParams
}

func newGptOssMoE(mode string, E, hidden, inter int) gptOssMoE {
	at := uintptr(1) << 40
	next := func() uintptr { at += 1 << 34; return at }
	dense := func(out, in int, dt tensor.DType) *weight {
		return &weight{shape: []int{out, in}, experts: 1, out: out, in: in, dtype: dt, w: next()}
	}
	return gptOssMoE{
		rw: dense(E, hidden, tensor.BF16),
		ex: backend.Experts{Gate: fpWeight(mode, E, inter, hidden, next()), Up: fpWeight(mode, E, inter, hidden, next()),
			Down: fpWeight(mode, E, hidden, inter, next()), GateBias: dense(E, inter, tensor.BF16),
			UpBias: dense(E, inter, tensor.BF16), DownBias: dense(E, hidden, tensor.BF16),
			RouterBias: dense(1, E, tensor.F32)},
		p: backend.MoEParams{TopK: 4, Renorm: true, Act: backend.SwiGLUClamped, Alpha: 1.702, Limit: 7},
	}
}

// TestRecordMoEPrefillFP records, without a device, gpt-oss's MoE block at
// gpt-oss-20b's and -120b's shapes (32 and 128 experts of 2880 x 2880,
// top-4, biases, clamped SwiGLU) and plain experts at odd widths: steps of
// 8 tokens or more (plan.MoEGEMMFrom) in mxfp4 and nvfp4 must take the grouped
// GEMM with the SBmx kernels (moe_qmma4_fp / _fp2, gshift 6, the scale
// strides of a word a group or pair), mxfp8 and shorter steps the
// per-token path; every launch's arguments must match its kernel.
func TestRecordMoEPrefillFP(t *testing.T) {
	sigs := kernelSignatures(t)
	for _, c := range []struct {
		mode                string
		E, hidden, inter, T int
		plain               bool   // no extras: SiLU, no biases
		qmma                string // the grouped path's expert kernel; "" the per-token path
	}{
		{quant.MXFP4, 32, 2880, 2880, 512, false, "moe_qmma4_fp"},  // gpt-oss-20b
		{quant.MXFP4, 128, 2880, 2880, 512, false, "moe_qmma4_fp"}, // gpt-oss-120b
		{quant.MXFP4, 32, 2880, 2880, 8, false, "moe_qmma4_fp"},    // mxfp4 goes grouped from 8 tokens (plan.MoEGEMMFrom)
		{quant.MXFP4, 32, 2880, 2880, 7, false, ""},
		{quant.NVFP4, 32, 2880, 2880, 512, false, "moe_qmma4_fp2"},
		{quant.MXFP8, 32, 2880, 2880, 512, false, ""}, // byte codes: not qmma4's layout
		{quant.MXFP4, 16, 576, 320, 100, true, "moe_qmma4_fp"},
		{quant.NVFP4, 16, 576, 320, 100, true, "moe_qmma4_fp2"},
		{quant.MXFP4, 16, 576, 352, 100, true, ""}, // 352: not a multiple of 64
	} {
		t.Run(fmt.Sprintf("%s_E%d_%dx%d_T%d_plain=%v", c.mode, c.E, c.hidden, c.inter, c.T, c.plain), func(t *testing.T) {
			b := hostOnlyBackend()
			b.arena.chunks = []devBuf{{ptr: 1 << 36, size: 1 << 33}}
			m := newGptOssMoE(c.mode, c.E, c.hidden, c.inter)
			if c.plain {
				m.ex = backend.Experts{Gate: m.ex.Gate, Up: m.ex.Up, Down: m.ex.Down}
				m.p = backend.MoEParams{TopK: 4, Renorm: true, Act: backend.SiLU}
			}
			h := &Tensor{ptr: 1 << 39, rows: c.T, cols: c.hidden}
			o := &Tensor{ptr: 1<<39 + 1<<30, rows: c.T, cols: c.hidden}
			b.MoE(o, h, m.rw, m.ex, m.p)
			if b.err != nil {
				t.Fatal(b.err)
			}
			names := launchNames(b)
			if got := count(names, "moe_align") == 1; got != (c.qmma != "") {
				t.Fatalf("grouped path %v, want %v: %v", got, c.qmma != "", names)
			}
			checkLaunches(t, b, sigs)
			if c.qmma == "" {
				return
			}
			if n := count(names, c.qmma); n != 2 {
				t.Fatalf("%d launches of %s, want 2 (gate/up, down): %v", n, c.qmma, names)
			}
			for i, name := range names {
				if name != c.qmma {
					continue
				}
				a := b.rec.ls[i].args
				// moe_qmma4's arguments: y0 y1 x w0 sb0 w1 sb1 tileE ntiles N K gshift wstride sbstride.
				N, K := int(a[9]), int(a[10])
				if int(a[11]) != 6 || int(a[12]) != N*K/8 || int(a[13]) != N*K/32 {
					t.Errorf("launch %d (%dx%d): gshift %d, strides %d %d; want 6, %d, %d", i, N, K, a[11], a[12], a[13], N*K/8, N*K/32)
				}
				if gy, tiles := int(b.rec.ls[i].gy), moeMaxTiles(c.T*4, c.E); gy != tiles {
					t.Errorf("launch %d: grid y %d, want the %d tiles", i, gy, tiles)
				}
			}
		})
	}
}

// TestBenchMoEPrefillFP times one gpt-oss-20b MoE layer (32 experts of
// 2880 x 2880 in mxfp4, top-4, biases, clamped SwiGLU; random codes and
// scales near 2^-8) at 512 and 2048 tokens on the grouped path against
// moeGrouped's per-token GEMVs, interleaved (grouped, per-token, grouped,
// per-token), and checks that the two agree (1e-2 normalised: f16
// activations on the tensor cores). MLXCEL_CUDA_BENCH=1 enables it.
func TestBenchMoEPrefillFP(t *testing.T) {
	o := benchEnabled(t)
	b := newOrSkip(t)
	defer b.Close()
	defer o.print()
	const E, hidden, inter = 32, 2880, 2880
	upload := func(h *tensor.Host) backend.Weight {
		w, err := b.UploadWeight(h)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	rng := rand.New(rand.NewSource(1))
	randn := func(n int, s float64) []float32 {
		x := make([]float32, n)
		for j := range x {
			x[j] = float32(rng.NormFloat64() * s)
		}
		return x
	}
	fw := func(name string, out, in int, seed uint64) backend.Weight {
		h := fpHost(quant.MXFP4, E*out, in, seed)
		h.Name, h.Shape = name, []int{E, out, in}
		return upload(h)
	}
	ex := backend.Experts{Gate: fw("gate", inter, hidden, 1), Up: fw("up", inter, hidden, 2), Down: fw("down", hidden, inter, 3),
		GateBias: upload(bf16Host("gate_bias", []int{E, inter}, randn(E*inter, 0.1))),
		UpBias:   upload(bf16Host("up_bias", []int{E, inter}, randn(E*inter, 0.1))),
		DownBias: upload(bf16Host("down_bias", []int{E, hidden}, randn(E*hidden, 0.1))),
		RouterBias: upload(&tensor.Host{Name: "router_bias", Shape: []int{E}, DType: tensor.F32,
			Data: f32le(randn(E, 0.5))})}
	router := upload(bf16Host("router", []int{E, hidden}, randn(E*hidden, 0.02)))
	wbytes := 3.0 * E * inter * hidden * (0.5 + 4.0/32) // codes and a u32 scale word a group
	p := backend.MoEParams{TopK: 4, Renorm: true, Act: backend.SwiGLUClamped, Alpha: 1.702, Limit: 7}
	perToken := func(d, x backend.Tensor, rw backend.Weight, e backend.Experts, p backend.MoEParams) {
		b.mu.Lock()
		defer b.mu.Unlock()
		s, w := b.tt(x), b.wt(rw)
		b.moeGrouped(b.tt(d), s, s, w, b.wt(e.Gate), b.wt(e.Up), b.wt(e.Down), p, b.moeExtrasOf(e, p, E, inter, hidden))
	}
	for _, T := range []int{512, 2048} {
		xt := upload(&tensor.Host{Name: "x", Shape: []int{T, hidden}, DType: tensor.F32, Data: f32le(randn(T*hidden, 1))})
		batch := &backend.Batch{Tokens: make([]int32, T), Positions: make([]int32, T),
			Seqs: []backend.SeqSlice{{Start: 0, Len: T, Blocks: []int32{0}}}}
		for j := range T {
			batch.Tokens[j], batch.Positions[j] = int32(j), int32(j)
		}
		var outs [2][]float32
		for round := range 2 {
			for k, grouped := range []bool{true, false} {
				moe := b.MoE
				if !grouped {
					moe = perToken
				}
				us := timeMoE(t, b, batch, xt, T, hidden, func(out, x backend.Tensor) { moe(out, x, router, ex, p) }, &outs[k])
				cfg := map[bool]string{true: "grouped", false: "per-token"}[grouped]
				t.Logf("T=%d %s (round %d): %.0f us per layer", T, cfg, round, us)
				o.add("moe_prefill_fp", cfg, T, "gptoss20b_E32top4_2880x2880_mxfp4", us, wbytes/us/1e3, 0, fmt.Sprintf("round %d", round))
			}
		}
		groupedMatches(t, T, outs[0], outs[1])
	}
}

// timeMoE runs moe once to warm up and then 3 times in one step, and
// returns the microseconds a call, leaving the output in *out.
func timeMoE(t *testing.T, b *Backend, batch *backend.Batch, xt backend.Weight, T, hidden int,
	moe func(out, x backend.Tensor), out *[]float32) float64 {
	t.Helper()
	const reps = 3
	if err := b.BeginStep(batch); err != nil {
		t.Fatal(err)
	}
	x, y := b.NewTensor(T, hidden), b.NewTensor(T, hidden)
	b.Embed(x, xt)
	moe(y, x)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for range reps {
		moe(y, x)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	us := float64(time.Since(t0).Microseconds()) / reps
	*out = make([]float32, T*hidden)
	b.ReadRows(y, *out)
	return us
}

// TestMxFoldModel checks, on the host, the arithmetic moe_qmma4_fp/_fp2
// do for one 64-wide slab of one weight row (mma.cu: fp4x2_h16, mx_fold,
// qmma_math_fp, with qmma_packx's power-of-two x scale), modelled in Go
// with f16 rounding where the kernel rounds (the folded A operand, x),
// against the exact dot product of the dequantized weights: scale words
// from fpScales (mxfp4 E8M0 bytes spread over 2^-24..2^8, some slabs with
// one group 2^-16 of the other; nvfp4 E4M3 pairs), random codes.
func TestMxFoldModel(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	h16 := func(f float64) float64 { return float64(tensor.F16ToF32(tensor.F32ToF16(float32(f)))) }
	worst := 0.0
	for trial := range 4000 {
		pair := trial%2 == 1
		mode, ng := quant.MXFP4, 2
		if pair {
			mode, ng = quant.NVFP4, 4
		}
		sb := make([]byte, ng)
		for i := range sb {
			if pair {
				sb[i] = byte(0x08 + rng.Intn(0x70)) // E4M3 2^-6..448
			} else {
				sb[i] = byte(103 + rng.Intn(32)) // E8M0 2^-24..2^7
			}
		}
		if !pair && trial%10 == 0 {
			sb[1] = sb[0] - 16
		}
		words, err := fpScales(mode, 4, sb, pair)
		if err != nil {
			t.Fatal(err)
		}
		sc := [2]uint32{}
		for i := range sc {
			sc[i] = uint32(words[4*i]) | uint32(words[4*i+1])<<8 | uint32(words[4*i+2])<<16 | uint32(words[4*i+3])<<24
		}
		var codes [64]uint8
		var x [64]float64
		mx := 0.0
		for k := range 64 {
			codes[k], x[k] = uint8(rng.Intn(16)), rng.NormFloat64()
			mx = math.Max(mx, math.Abs(x[k]))
		}
		sc2 := math.Ldexp(1, 13-int(math.Floor(math.Log2(mx)))) // qmma_packx: max in [2^13, 2^14)
		var c, exact, norm, P float64
		for th := range 4 { // the four threads t of a row's mma k
			var h float64
			P, h = mxFoldModel(sc, th, pair)
			for k := 16 * th; k < 16*th+16; k++ {
				a := h16(fp4Code16(codes[k]) * h) // mul.rn.f16x2
				c += a * h16(x[k]*sc2)
				g := k / 32
				if pair {
					g = k / 16
				}
				v := float64(quant.E2M1(codes[k])) * float64(quant.FPScale(mode, sb[g])) * x[k]
				exact, norm = exact+v, norm+v*v
			}
		}
		got := P / sc2 * c
		if e := math.Abs(got-exact) / (math.Sqrt(norm) + 1e-300); e > worst {
			worst = e
		}
	}
	t.Logf("worst error against the slab's term norm: %.3g", worst)
	if worst > 2e-3 {
		t.Errorf("folded scales: error %.3g of the term norm, want f16 x rounding (< 2e-3)", worst)
	}
}

// fp4Code16 is fp4x2_h16's value of one code (E2M1 times 2^-14), from the
// kernel's bit move on a word holding the code at bits 0-3.
func fp4Code16(c uint8) float64 {
	v := uint32(c)
	h := ((v << 12) & 0x80008000) | ((v << 9) & 0x0E000E00)
	return float64(tensor.F16ToF32(uint16(h)))
}

// mxFoldModel is mx_fold (mma.cu): the slab's P times 2^-14 and thread
// t's factor, rounded to f16 as f16x2 does.
func mxFoldModel(sc [2]uint32, t int, pair bool) (float64, float64) {
	lo := func(v uint32) float32 { return math.Float32frombits(v << 16) }
	hi := func(v uint32) float32 { return math.Float32frombits(v & 0xffff0000) }
	abs := func(f float32) float32 { return float32(math.Abs(float64(f))) }
	m := max(abs(lo(sc[0])), abs(hi(sc[0])), abs(lo(sc[1])), abs(hi(sc[1])))
	pb := math.Float32bits(m) & 0x7f800000
	own := sc[t>>1]
	if pair && t&1 == 1 {
		own >>= 16
	}
	hf := lo(own) * math.Float32frombits(0x86000000-pb)
	return float64(math.Float32frombits(pb) * (1.0 / 16384)), float64(tensor.F16ToF32(tensor.F32ToF16(hf)))
}
