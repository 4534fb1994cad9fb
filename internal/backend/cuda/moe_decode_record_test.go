//go:build linux

package cuda

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// TestRecordGptOssMoEDecode checks, without a GPU, that gpt-oss-20b's MoE
// block at decode row counts records the three-launch path's kernels (the
// _x forms of the stages with extras) and nothing else: no moe_slot_bias,
// moe_swiglu or the grouped path's seven launches; that calls without the
// extras keep the plain kernels; and that the arguments match the kernels'
// parameters.
func TestRecordGptOssMoEDecode(t *testing.T) {
	sigs := kernelSignatures(t)
	const E, H, I = 32, 2880, 2880 // gpt-oss-20b: 32 experts of 2880 x 2880, top-4
	addr := uintptr(1 << 40)
	next := func() uintptr { addr += 1 << 32; return addr }
	dense := func(dt tensor.DType, shape ...int) *weight {
		w := &weight{shape: shape, experts: 1, dtype: dt, w: next(), out: 1, in: shape[len(shape)-1]}
		if len(shape) == 2 {
			w.out = shape[0]
		}
		return w
	}
	q8 := func(out, in int) *weight { // mlx's 8-bit router: bf16 scales, groups of 64
		w := dense(tensor.BF16, out, in)
		w.quant, w.bits, w.group, w.gshft, w.sb = true, 8, 64, 6, w.w+1<<30
		return w
	}
	clamped := backend.MoEParams{TopK: 4, Renorm: true, Act: backend.SwiGLUClamped, Alpha: 1.702, Limit: 7}
	silu := backend.MoEParams{TopK: 4, Renorm: true, Act: backend.SiLU}
	for _, c := range []struct {
		name    string
		mode    string // the experts' mx mode
		router  func() *weight
		extras  string // r(outer) g(ate) u(p) d(own) biases
		p       backend.MoEParams
		want    []string
		grouped bool // the extras' own launches (moe_slot_bias) expected
	}{
		{"mxfp4-q8", quant.MXFP4, func() *weight { return q8(E, H) }, "rgud", clamped,
			[]string{"moe_router8_bf_x", "moe_gateup4_fp_g64_x", "moe_down_sum4_fp_g64_x"}, false},
		{"mxfp4-bf16", quant.MXFP4, func() *weight { return dense(tensor.BF16, E, H) }, "rgud", clamped,
			[]string{"moe_router_bf16_x", "moe_gateup4_fp_g64_x", "moe_down_sum4_fp_g64_x"}, false},
		{"no extras", quant.MXFP4, func() *weight { return q8(E, H) }, "", silu,
			[]string{"moe_router8_bf", "moe_gateup4_fp_g64", "moe_down_sum4_fp_g64"}, false},
		{"clamp only", quant.MXFP4, func() *weight { return q8(E, H) }, "", clamped,
			[]string{"moe_router8_bf", "moe_gateup4_fp_g64_x", "moe_down_sum4_fp_g64"}, false},
		// mxfp8 rows of 2880: 180 chunks, the 128-lane forms.
		{"down bias only", quant.MXFP8, func() *weight { return q8(E, H) }, "d", silu,
			[]string{"moe_router8_bf", "moe_gateup8_fp", "moe_down_sum8_fp_x"}, false},
		// nvfp4 experts have no _x kernels: the grouped path.
		{"nvfp4", quant.NVFP4, func() *weight { return q8(E, H) }, "rgud", clamped, nil, true},
	} {
		for _, T := range []int{1, 2, 5, 7} { // mxfp4 and nvfp4 go to the grouped GEMM from 8 (plan.MoEGEMMFrom)
			t.Run(fmt.Sprintf("%s/T%d", c.name, T), func(t *testing.T) {
				b := hostOnlyBackend()
				ex := backend.Experts{Gate: fpWeight(c.mode, E, I, H, next()), Up: fpWeight(c.mode, E, I, H, next()),
					Down: fpWeight(c.mode, E, H, I, next())}
				for _, k := range c.extras {
					switch k {
					case 'r':
						ex.RouterBias = dense(tensor.F32, E)
					case 'g':
						ex.GateBias = dense(tensor.BF16, E, I)
					case 'u':
						ex.UpBias = dense(tensor.BF16, E, I)
					case 'd':
						ex.DownBias = dense(tensor.BF16, E, H)
					}
				}
				x, y := &Tensor{ptr: next(), rows: T, cols: H}, &Tensor{ptr: next(), rows: T, cols: H}
				b.MoE(y, x, c.router(), ex, c.p)
				names := launchNames(b)
				checkLaunches(t, b, sigs)
				if c.grouped {
					if !slices.Contains(names, "moe_slot_bias") || !slices.Contains(names, "moe_swiglu") {
						t.Errorf("recorded %v, want the grouped path with its extras' launches", names)
					}
					return
				}
				if !slices.Equal(names, c.want) {
					t.Errorf("recorded %v, want %v", names, c.want)
				}
			})
		}
	}
}
