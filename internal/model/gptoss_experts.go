package model

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// hostSource is a Source that hands out tensors before upload, so a
// family can rearrange a layout the backend does not take as stored
// (gpt-oss's interleaved, transposed or openai-MXFP4 experts). The
// checkpoint source implements it.
type hostSource interface {
	hostUploader
	HostDense(name string, shape ...int) (*tensor.Host, error)
	HostMXFP4(name string, shape ...int) (*tensor.Host, error)
}

// HostMXFP4 reads openai's name_blocks/name_scales (weights.MXFP4Blocks).
func (c *checkpointSource) HostMXFP4(name string, shape ...int) (*tensor.Host, error) {
	return c.ck.MXFP4Blocks(name, shape...)
}

// uploadRearranged uploads a rearranged tensor, counted as the bytes it holds (the
// halves of a split add up to the stored tensor).
func uploadRearranged(hs hostUploader, h *tensor.Host) (backend.Weight, error) {
	n := int64(len(h.Data))
	if h.Quant != nil {
		n += int64(len(h.Quant.Scales) + len(h.Quant.Biases))
	}
	return hs.UploadHost(h, n)
}

// loadGptOssMoE reads pre's router and experts in whichever layout the
// checkpoint has.
func loadGptOssMoE(src Source, pre string, cfg *weights.Config, p backend.MoEParams) (*MoE, error) {
	E, H, I := cfg.NumExperts, cfg.Hidden, cfg.Intermediate
	if E <= 0 || p.TopK <= 0 || p.TopK > E {
		return nil, fmt.Errorf("%s: num_experts_per_tok %d must be in 1..num_local_experts (%d)", pre, p.TopK, E)
	}
	m := &MoE{Params: p}
	var err error
	if m.Router, err = src.Linear(pre+".router", E, H); err != nil {
		return nil, err
	}
	if m.Experts.RouterBias, err = src.Dense(pre+".router.bias", E); err != nil {
		return nil, err
	}
	ex := pre + ".experts"
	// Expert parallel: the router above is whole, the experts the rank's.
	if es, ok := src.(expertSharder); ok {
		lo, hi := es.ExpertRange()
		m.Experts.Lo, E = lo, hi-lo
	}
	if src.Has(ex + ".gate_proj.weight") {
		err = loadMLXExperts(src, ex, &m.Experts, E, H, I)
	} else {
		err = loadHFExperts(src, ex, &m.Experts, E, H, I)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// loadMLXExperts: mlx-lm's split experts, [E, out, in] with .bias.
func loadMLXExperts(src Source, ex string, e *backend.Experts, E, H, I int) error {
	var err error
	for _, w := range []struct {
		dst, bias *backend.Weight
		name      string
		out, in   int
	}{{&e.Gate, &e.GateBias, "gate_proj", I, H}, {&e.Up, &e.UpBias, "up_proj", I, H}, {&e.Down, &e.DownBias, "down_proj", H, I}} {
		if *w.dst, err = src.Linear(ex+"."+w.name, E, w.out, w.in); err != nil {
			return err
		}
		if *w.bias, err = src.Dense(ex+"."+w.name+".bias", E, w.out); err != nil {
			return err
		}
	}
	return nil
}

// loadHFExperts: transformers' gate_up_proj (gate columns/rows even, up
// odd) and down_proj, dense [E, in, out] or openai MXFP4 [E, out, in].
func loadHFExperts(src Source, ex string, e *backend.Experts, E, H, I int) error {
	hs, ok := src.(hostSource)
	if !ok {
		return fmt.Errorf("%s: gate_up_proj experts need a source that can rearrange tensors on the host", ex)
	}
	gateUp, down, err := hfExpertHosts(hs, ex, E, H, I)
	if err != nil {
		return err
	}
	gub, err := hs.HostDense(ex+".gate_up_proj_bias", E, 2*I)
	if err != nil {
		return err
	}
	gub.Shape = []int{E, 2 * I, 1} // one value per row, split like the rows
	var hosts [4]*tensor.Host
	for j, h := range []*tensor.Host{gateUp, gateUp, gub, gub} {
		if hosts[j], err = weights.SplitRows(h, j%2); err != nil {
			return err
		}
	}
	hosts[2].Shape, hosts[3].Shape = []int{E, I}, []int{E, I}
	for j, dst := range []*backend.Weight{&e.Gate, &e.Up, &e.GateBias, &e.UpBias} {
		if *dst, err = uploadRearranged(hs, hosts[j]); err != nil {
			return err
		}
	}
	if e.Down, err = uploadRearranged(hs, down); err != nil {
		return err
	}
	e.DownBias, err = src.Dense(ex+".down_proj_bias", E, H)
	return err
}

// hfExpertHosts returns gate_up [E, 2I, H] and down [E, H, I] in the
// backend's [out, in] order.
func hfExpertHosts(hs hostSource, ex string, E, H, I int) (gateUp, down *tensor.Host, err error) {
	if src, ok := hs.(Source); ok && src.Has(ex+".gate_up_proj_blocks") {
		if gateUp, err = hs.HostMXFP4(ex+".gate_up_proj", E, 2*I, H); err != nil {
			return nil, nil, err
		}
		down, err = hs.HostMXFP4(ex+".down_proj", E, H, I)
		return gateUp, down, err
	}
	if gateUp, err = hs.HostDense(ex+".gate_up_proj", E, H, 2*I); err != nil {
		return nil, nil, err
	}
	if gateUp, err = weights.TransposeExperts(gateUp); err != nil {
		return nil, nil, err
	}
	if down, err = hs.HostDense(ex+".down_proj", E, I, H); err != nil {
		return nil, nil, err
	}
	down, err = weights.TransposeExperts(down)
	return gateUp, down, err
}
