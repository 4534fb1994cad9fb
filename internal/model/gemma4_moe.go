package model

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Gemma 4's MoE block (26B-A4B, enable_moe_block), as transformers'
// Gemma4TextDecoderLayer runs it: beside the dense MLP, not instead of it.
// With r the residual stream entering the feed-forward half,
//
//	ffn = post_ff_norm_1(mlp(pre_ff_norm(r))) + post_ff_norm_2(experts(pre_ff_norm_2(r)))
//
// then post_feedforward_layernorm and the residual add as usual. The
// router reads its own normalisation of r: a weightless RMSNorm times
// router.scale times hidden^-0.5, folded here into one RMSNorm weight;
// softmax over all experts, top-k, renormalised, then each weight times
// router.per_expert_scale (Experts.Scale). Since the router and the
// experts see different inputs, the block needs backend.RoutedMoE
// (FeatureMoERouted), which buildGemma4 asks for at load.
type gemmaMoE struct {
	be                                 backend.RoutedMoE
	routerNorm, preNorm2, post1, post2 backend.Weight
	router                             backend.Weight
	experts                            backend.Experts
	params                             backend.MoEParams
}

// forward adds the experts' share to o, the dense MLP's output for the
// residual x.
func (m *gemmaMoE) forward(s *Step, x, o backend.Tensor, hidden int, eps float32) {
	b := s.B
	r, h, y := s.Scratch("moe.r", hidden), s.Scratch("moe.h", hidden), s.Scratch("moe.y", hidden)
	b.RMSNorm(o, o, m.post1, eps)
	b.RMSNorm(r, x, m.routerNorm, eps)
	b.RMSNorm(h, x, m.preNorm2, eps)
	m.be.MoERouted(y, h, r, m.router, m.experts, m.params)
	b.RMSNorm(y, y, m.post2, eps)
	b.Add(o, o, y)
}

// gemma4MoELoader returns the spec's moe loader, or nil without
// enable_moe_block. be must run FeatureMoERouted.
func gemma4MoELoader(cfg *weights.Config, src Source, be backend.Backend) (func(string) (*gemmaMoE, error), error) {
	if cfg.Raw["enable_moe_block"] != true {
		return nil, nil
	}
	rm, ok := be.(backend.RoutedMoE)
	if !ok || !backend.Supports(be, backend.FeatureMoERouted) {
		return nil, fmt.Errorf("gemma4: the MoE block needs %s, which the %s backend does not run", backend.FeatureMoERouted, be.Name())
	}
	act, err := activation(cfg.HiddenAct)
	if err != nil {
		return nil, err
	}
	num := func(k string) int { f, _ := cfg.Raw[k].(float64); return int(f) }
	E, K, I, H := num("num_experts"), num("top_k_experts"), num("moe_intermediate_size"), cfg.Hidden
	if E <= 0 || K <= 0 || K > E || I <= 0 {
		return nil, fmt.Errorf("gemma4: MoE block with num_experts %d, top_k_experts %d, moe_intermediate_size %d", E, K, I)
	}
	c := float32(1 / math.Sqrt(float64(H)))
	return func(prefix string) (*gemmaMoE, error) {
		m := &gemmaMoE{be: rm, params: backend.MoEParams{TopK: K, Renorm: true, Act: act}}
		var err error
		for _, n := range []struct {
			dst  *backend.Weight
			name string
		}{{&m.preNorm2, "pre_feedforward_layernorm_2"}, {&m.post1, "post_feedforward_layernorm_1"},
			{&m.post2, "post_feedforward_layernorm_2"}} {
			if *n.dst, err = src.Dense(prefix+"."+n.name+".weight", H); err != nil {
				return nil, err
			}
		}
		if m.routerNorm, err = derivedNorm(src, be, prefix+".router.scale", H, func(w float32) float32 { return w * c }); err != nil {
			return nil, err
		}
		if m.router, err = src.Linear(prefix+".router.proj", E, H); err != nil {
			return nil, err
		}
		if m.experts.Scale, err = src.Dense(prefix+".router.per_expert_scale", E); err != nil {
			return nil, err
		}
		if err = loadGemma4Experts(src, prefix+".experts", &m.experts, E, H, I); err != nil {
			return nil, err
		}
		return m, nil
	}, nil
}

// loadGemma4Experts reads mlx-lm's experts.switch_glu.{gate,up,down}_proj,
// or transformers' gate_up_proj [E, 2I, H] (gate rows, then up rows) and
// down_proj [E, H, I], both already [out, in].
func loadGemma4Experts(src Source, ex string, e *backend.Experts, E, H, I int) error {
	var err error
	if src.Has(ex + ".switch_glu.gate_proj.weight") {
		for _, w := range []struct {
			dst     *backend.Weight
			name    string
			out, in int
		}{{&e.Gate, "gate_proj", I, H}, {&e.Up, "up_proj", I, H}, {&e.Down, "down_proj", H, I}} {
			if *w.dst, err = src.Linear(ex+".switch_glu."+w.name, E, w.out, w.in); err != nil {
				return err
			}
		}
		return nil
	}
	return loadFusedExperts(src, ex, e, E, H, I)
}

// loadFusedExperts reads transformers 5's fused experts: gate_up_proj
// [E, 2I, H] (gate rows, then up rows) and down_proj [E, H, I], both
// already [out, in].
func loadFusedExperts(src Source, ex string, e *backend.Experts, E, H, I int) error {
	hs, ok := src.(hostSource)
	if !ok {
		return fmt.Errorf("%s: gate_up_proj experts need a source that can split tensors on the host", ex)
	}
	gateUp, err := hs.HostDense(ex+".gate_up_proj", E, 2*I, H)
	if err != nil {
		return err
	}
	for half, dst := range []*backend.Weight{&e.Gate, &e.Up} {
		h, err := weights.SplitHalves(gateUp, half)
		if err != nil {
			return err
		}
		if *dst, err = uploadRearranged(hs, h); err != nil {
			return err
		}
	}
	down, err := hs.HostDense(ex+".down_proj", E, H, I)
	if err != nil {
		return err
	}
	e.Down, err = uploadRearranged(hs, down)
	return err
}
