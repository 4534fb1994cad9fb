//go:build linux

package cuda

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// kernelSignatures runs the C preprocessor over the embedded kernel source
// (NVRTC sees the same text: the files have no #include) and returns every
// extern "C" kernel's parameter kinds, the macro-generated kernels
// included. Types: pointers (any), int, long long, float.
func kernelSignatures(t *testing.T) map[string][]argKind {
	t.Helper()
	sigs := map[string][]argKind{}
	for _, m := range kernelEntry.FindAllStringSubmatch(preprocessed(t, kernelSource()), -1) {
		var kinds []argKind
		for _, p := range strings.Split(m[2], ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == "":
				continue
			case strings.Contains(p, "*"):
				kinds = append(kinds, argPtr)
			case strings.HasPrefix(p, "long long ") || strings.HasPrefix(p, "const long long "):
				kinds = append(kinds, argI64)
			case strings.HasPrefix(p, "int ") || strings.HasPrefix(p, "const int "):
				kinds = append(kinds, argI32)
			case strings.HasPrefix(p, "float ") || strings.HasPrefix(p, "const float "):
				kinds = append(kinds, argF32)
			default:
				t.Fatalf("kernel %s: parameter %q of a type the launch builder has no kind for", m[1], p)
			}
		}
		sigs[m[1]] = kinds
	}
	return sigs
}

// preprocessed runs the C preprocessor over kernel source and folds its
// white space (for kernelEntry).
func preprocessed(t *testing.T, src string) string {
	t.Helper()
	cmd := exec.Command("cpp", "-P", "-x", "c++", "-")
	cmd.Stdin = strings.NewReader(src)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpp (gcc's preprocessor, on every CI machine) over the kernel source: %v", err)
	}
	return regexp.MustCompile(`\s+`).ReplaceAllString(string(out), " ")
}

// kernelEntry matches a kernel definition in preprocessed source: its name
// and parameters.
var kernelEntry = regexp.MustCompile(`extern "C" __global__ void (?:__launch_bounds__ ?\((?:[^()]|\([^()]*\))*\) )?(\w+) ?\(([^)]*)\)`)

// TestKernelNamesMatchSource: the names resolved at start are exactly the
// kernels the (preprocessed) source defines.
func TestKernelNamesMatchSource(t *testing.T) {
	sigs := kernelSignatures(t)
	names := map[string]bool{}
	for _, n := range kernelNames() {
		names[n] = true
		if _, ok := sigs[n]; !ok {
			t.Errorf("kernelNames lists %s, which the source does not define", n)
		}
	}
	for n := range sigs {
		if !names[n] {
			t.Errorf("the source defines %s, which kernelNames does not list (New would not resolve it)", n)
		}
	}
}

// TestLaunchSignatures checks, without a GPU, that every launch the
// Llama-3.1-8B and Qwen3-30B-A3B decode steps record passes its kernel's
// parameters in number and kind: a kernel's parameter list and the Go code
// that fills it are edited apart, and a mismatch would only show on the
// device, as garbage arguments.
func TestLaunchSignatures(t *testing.T) {
	sigs := kernelSignatures(t)
	for _, c := range []struct {
		name, model string
		set         func(b *Backend)
	}{
		{"llama", "llama", func(*Backend) {}},
		{"qwen3", "qwen3", func(*Backend) {}},
		{"qwen3 ticket merge", "qwen3", func(b *Backend) { b.DecClusterMax = 0 }},
		{"qwen3 whole groups", "qwen3", func(b *Backend) { b.DecHeads = 0 }},
		// The tile kernel of batched steps, reached here at one sequence.
		{"llama decode tile", "llama", decodeTileAt1},
		{"qwen3 decode tile", "qwen3", decodeTileAt1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hostOnlyBackend()
			c.set(b)
			recordModelStep(b, c.model, 2)
			checked := checkLaunches(t, b, sigs)
			if checked == 0 {
				t.Fatal("no launch checked")
			}
			if strings.HasSuffix(c.name, "decode tile") && !slices.Contains(launchNames(b), "attn_dtile_128") {
				t.Errorf("no attn_dtile_128 launch among %v", launchNames(b))
			}
			t.Logf("%d launches checked", checked)
		})
	}
}

// decodeTileAt1 makes a host-only backend's one-sequence decode step take
// attn_dtile, as batched steps do.
func decodeTileAt1(b *Backend) {
	b.DecTileMinTokens = 1
	b.dtile = map[string]map[int]bool{"": {64: true, 128: true, 256: true}, "_f8": {64: true, 128: true, 256: true}}
}

// checkLaunches compares every launch b recorded with its kernel's
// parameters in number and kind and returns how many it checked.
func checkLaunches(t *testing.T, b *Backend, sigs map[string][]argKind) int {
	t.Helper()
	checked := 0
	for i, name := range launchNames(b) {
		l := &b.rec.ls[i]
		if l.fn == fnGemm {
			continue
		}
		want, ok := sigs[name]
		if !ok {
			t.Fatalf("launch %d: kernel %q not in the source", i, name)
		}
		checked++
		if int(l.n) != len(want) {
			t.Errorf("launch %d: %s with %d arguments, its kernel declares %d", i, name, l.n, len(want))
			continue
		}
		for a, k := range want {
			if l.kind(a) != k {
				t.Errorf("launch %d: %s argument %d passed as kind %d, declared %d", i, name, a, l.kind(a), k)
			}
		}
	}
	return checked
}

// TestLaunchSignaturesFeatures: the launches of the backend.Features the
// cuda backend declares (attention sinks in decode, generic and flash
// attention; a KV-shared layer's attention; MoE biases, clamped SwiGLU,
// routed MoE with expert scales), recorded without a device, pass their
// kernels' parameters, and each launches the kernels it should.
func TestLaunchSignaturesFeatures(t *testing.T) {
	sigs := kernelSignatures(t)
	for _, decode := range []bool{true, false} {
		t.Run(fmt.Sprintf("decode=%v", decode), func(t *testing.T) {
			b := hostOnlyBackend()
			b.flash2 = map[string]map[int]bool{"": {64: true, 128: true}, "_f8": {64: true, 128: true}}
			T := 1
			if !decode {
				T = 40
				b.step.tokens, b.step.decode, b.step.maxLen, b.step.ntiles, b.step.tiles = T, false, T, 1, 0x120
			}
			addr := uintptr(1 << 24)
			act := func(cols int) *Tensor {
				addr += uintptr(4*T*cols+255) &^ 255
				return &Tensor{ptr: addr, rows: T, cols: cols}
			}
			dense := func(dt tensor.DType, shape ...int) *weight {
				addr += 1 << 20
				w := &weight{shape: shape, experts: 1, dtype: dt, w: addr}
				switch len(shape) {
				case 1:
					w.out, w.in = 1, shape[0]
				case 2:
					w.out, w.in = shape[0], shape[1]
				case 3:
					w.experts, w.out, w.in = shape[0], shape[1], shape[2]
				}
				return w
			}
			// gpt-oss-20b's attention shape: 64 heads of 64, 8 kv heads, a window.
			kv := &kvStore{spec: backend.KVSpec{NumBlocks: 64, BlockSize: 16, Layers: []backend.KVLayer{{KVHeads: 8, HeadDim: 64},
				{KVHeads: 8, HeadDim: 64, Shared: true}}}, k: []uintptr{1 << 30, 0}, v: []uintptr{1<<30 + 1<<24, 0}}
			q, k, v, o := act(64*64), act(8*64), act(8*64), act(64*64)
			p := backend.AttnParams{Heads: 64, KVHeads: 8, HeadDim: 64, Scale: 0.125, Window: 128, Sinks: dense(tensor.F32, 64)}
			b.Attention(o, q, k, v, kv, 0, p)
			b.Attention(o, q, nil, nil, kv, 0, backend.AttnParams{Heads: 64, KVHeads: 8, HeadDim: 64, Scale: 0.125})
			// An odd head dim takes the generic kernel.
			kv.spec.Layers[0] = backend.KVLayer{KVHeads: 2, HeadDim: 12}
			b.Attention(o, q, k, v, kv, 0, backend.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 12, Scale: 0.3, Sinks: dense(tensor.F32, 4)})

			E, H, I := 32, 256, 128
			x, rx, y := act(H), act(H), act(H)
			router := dense(tensor.BF16, E, H)
			e := backend.Experts{Gate: dense(tensor.BF16, E, I, H), Up: dense(tensor.BF16, E, I, H), Down: dense(tensor.BF16, E, H, I),
				GateBias: dense(tensor.BF16, E, I), UpBias: dense(tensor.BF16, E, I), DownBias: dense(tensor.F16, E, H),
				RouterBias: dense(tensor.F32, E)}
			b.MoE(y, x, router, e, backend.MoEParams{TopK: 4, Renorm: true, Act: backend.SwiGLUClamped, Alpha: 1.702, Limit: 7})
			b.MoERouted(y, x, rx, router, backend.Experts{Gate: e.Gate, Up: e.Up, Down: e.Down, Scale: dense(tensor.F32, E)},
				backend.MoEParams{TopK: 2, Renorm: true, Act: backend.GELUTanh})

			// Gemma 4 26B-A4B's block with 4-bit experts: the three-launch
			// decode path or the grouped GEMM, with the scales between the
			// routing and the experts.
			quant := func(shape ...int) *weight {
				w := dense(tensor.BF16, shape...)
				w.quant, w.bits, w.group, w.gshft, w.sb = true, 4, 64, 6, w.w+1<<19
				return w
			}
			n := len(b.rec.ls)
			b.MoERouted(y, x, rx, quant(E, H), backend.Experts{Gate: quant(E, I, H), Up: quant(E, I, H), Down: quant(E, H, I),
				Scale: dense(tensor.F32, E)}, backend.MoEParams{TopK: 4, Renorm: true, Act: backend.GELUTanh})
			q4 := launchNames(b)[n:]
			wantQ4 := map[bool]string{true: "moe_gateup4_bf", false: "moe_align"}[decode]
			t.Logf("routed 4-bit MoE: %v", q4)
			if len(q4) < 3 || q4[1] != "moe_scale_w" && q4[2] != "moe_scale_w" || !strings.Contains(strings.Join(q4, " "), wantQ4) {
				t.Errorf("routed 4-bit MoE recorded %v, want the routing, moe_scale_w and %s", q4, wantQ4)
			}

			// gpt-oss's block with 4-bit experts: biases and the clamp in
			// the grouped GEMM's moe_act and unsort-sum (prefill), in the
			// three-launch path's _x kernels otherwise (decode).
			b.MoE(y, x, router, backend.Experts{Gate: quant(E, I, H), Up: quant(E, I, H), Down: quant(E, H, I),
				GateBias: e.GateBias, UpBias: e.UpBias, DownBias: e.DownBias, RouterBias: e.RouterBias},
				backend.MoEParams{TopK: 4, Renorm: true, Act: backend.SwiGLUClamped, Alpha: 1.702, Limit: 7})

			checkLaunches(t, b, sigs)
			seen := map[string]int{}
			for _, n := range launchNames(b) {
				if strings.HasPrefix(n, "attn_decode_") {
					n = "attn_decode"
				}
				seen[n]++
			}
			// Attention: the sinks call on attn_decode (decode) or flash2;
			// the shared call stores nothing and, in decode, takes the
			// generic kernel; the head-dim-12 call stores and takes it.
			// MoE: the bf16 experts' gpt-oss call on the grouped path
			// (three moe_slot_bias, moe_swiglu), the 4-bit one on the
			// three-launch path's _x kernels (decode) or the GEMM.
			want := map[string]int{"attn_decode": 1, "attention": 2, "flash2_attn_64": 0, "kv_store": 1,
				"moe_slot_bias": 3, "moe_swiglu": 1, "moe_scale_w": 2, "moe_act": 0,
				"moe_router_bf16_g32_x": 1, "moe_gateup4_bf_g32_x": 1, "moe_down_sum4_bf_g32_x": 1}
			if !decode {
				want["attn_decode"], want["attention"], want["flash2_attn_64"], want["kv_store"] = 0, 1, 2, 2
				want["moe_act"], want["moe_router_bf16_g32_x"], want["moe_gateup4_bf_g32_x"], want["moe_down_sum4_bf_g32_x"] = 2, 0, 0, 0
			}
			for n, c := range want {
				if seen[n] != c {
					t.Errorf("%d %s launches, want %d, among %v", seen[n], n, c, launchNames(b))
				}
			}
		})
	}
}
