//go:build linux

package cuda

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// The extras some MoE blocks add to the routed gated MLP, on the per-token
// path (moeGrouped; kernels at the end of kernels/moe.cu):
//   - gpt-oss (FeatureMoEBiases, FeatureSwiGLUClamped): a router bias, gate,
//     up and down biases per expert, the clamped SwiGLU;
//   - Gemma 4 26B-A4B (FeatureMoERouted): the router reading another input
//     (MoERouted), a scale per expert on the renormalised routing weights.
// The router input and the scales only touch the routing, which every
// path takes (moe_scale_w after the routing). Biases and the clamped
// SwiGLU act inside the experts' MLP: the grouped GEMM (moe.cu) takes them
// in moe_act and moe_unsort_sum; the three-launch decode path in its _x
// kernels (moe_decode.cu, MDX: compile-time variants, so the kernels of
// calls without them are unchanged); moeGrouped in its own launches
// (moe_slot_bias, moe_swiglu) for the few-row calls the others do not
// take (dense experts, nvfp4).

// slotBias is a stacked [experts][n] expert bias: its device address and
// dtype code (denseCode); ptr 0 means none.
type slotBias struct {
	ptr uintptr
	dt  int
}

// moeExtras are one MoE call's extras, as device addresses (0: absent).
type moeExtras struct {
	routerBias, scale          uintptr // [experts] f32 vectors
	gateBias, upBias, downBias slotBias
	clamped                    bool // p.Act is SwiGLUClamped
}

// moeClamped is moe_act's code for the clamped SwiGLU (MOE_CLAMPED).
const moeClamped = 4

// gemmTakes reports whether the grouped GEMM runs these extras: moe_act
// reads the gate and up biases with one dtype.
func (x moeExtras) gemmTakes() bool {
	return x.gateBias.ptr == 0 || x.upBias.ptr == 0 || x.gateBias.dt == x.upBias.dt
}

// denseCode is a dense weight's dtype as dense_at (kernels/common.cu)
// reads it.
func denseCode(d tensor.DType) int {
	switch d {
	case tensor.BF16:
		return 1
	case tensor.F16:
		return 2
	case tensor.F32:
		return 0
	}
	panic(fmt.Sprintf("cuda: no kernel reads dense %s", d))
}

// moeExtrasOf checks e's optional weights against the block's shape (E
// experts, inter and hidden wide) and returns them as device addresses.
func (b *Backend) moeExtrasOf(e backend.Experts, p backend.MoEParams, E, inter, hidden int) moeExtras {
	x := moeExtras{clamped: p.Act == backend.SwiGLUClamped}
	vec := func(name string, w backend.Weight) uintptr {
		if w == nil {
			return 0
		}
		v := b.wt(w)
		if v.quant || v.dtype != tensor.F32 || v.out != 1 || v.in != E {
			panic(fmt.Sprintf("cuda: MoE %s of shape %v for %d experts", name, v.shape, E))
		}
		return v.w
	}
	stacked := func(name string, w backend.Weight, n int) slotBias {
		if w == nil {
			return slotBias{}
		}
		v := b.wt(w)
		if v.quant || v.experts != 1 || v.out != E || v.in != n {
			panic(fmt.Sprintf("cuda: MoE %s of shape %v for %d experts of %d", name, v.shape, E, n))
		}
		return slotBias{v.w, denseCode(v.dtype)}
	}
	x.routerBias, x.scale = vec("router bias", e.RouterBias), vec("expert scale", e.Scale)
	x.gateBias, x.upBias = stacked("gate bias", e.GateBias, inter), stacked("up bias", e.UpBias, inter)
	x.downBias = stacked("down bias", e.DownBias, hidden)
	return x
}

// moeScaleWeights multiplies the P routing weights by their experts'
// scales (scale 0: nothing to do).
func (b *Backend) moeScaleWeights(wts, idx, scale uintptr, P int) {
	if scale != 0 {
		b.newLaunch("moe_scale_w", (P+127)/128, 1, 1, 128).p(wts).p(idx).p(scale).i(P)
	}
}

// moeSlotBias adds each slot's expert bias to the [topk][T][n] slot
// outputs y (bias ptr 0: nothing to do).
func (b *Backend) moeSlotBias(y uintptr, bias slotBias, idx uintptr, T, topk, n int) {
	if bias.ptr != 0 {
		b.newLaunch("moe_slot_bias", T, topk, 1, min(256, roundUp(n, 32))).p(y).p(bias.ptr).i(bias.dt).p(idx).i(T).i(topk).i(n)
	}
}

// moeAct computes g = act(g) * u over the n slot elements: the gated
// kernels, or moe_swiglu for SwiGLUClamped (which takes up itself).
func (b *Backend) moeAct(g, u uintptr, n int, p backend.MoEParams) {
	if p.Act == backend.SwiGLUClamped {
		b.elementwise("moe_swiglu", n).p(g).p(u).i64(n).f(p.Alpha).f(p.Limit)
		return
	}
	b.elementwise(gatedKernel(p.Act), n).p(g).p(g).p(u).i64(n).p(0)
}
