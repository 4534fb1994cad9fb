package model

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Qwen3-MoE and Mixtral are the Llama family with a routed mixture of
// gated-MLP experts in place of (some of) the dense MLPs; only the FFN
// builder handed to buildLlamaWith differs.
func init() {
	Register("qwen3_moe", buildQwen3MoE)
	Register("mixtral", buildMixtral)
}

// moeNaming is where a family keeps its MoE block and what its HF
// checkpoints call each expert's gate, up and down projections. MLX
// checkpoints use one naming for all: <block>.switch_mlp.{gate,up,down}_proj,
// already stacked [experts, out, in]. The router is <block>.gate in both.
type moeNaming struct {
	block string
	hf    [3]string
}

var (
	qwenMoENaming    = moeNaming{"mlp", [3]string{"gate_proj", "up_proj", "down_proj"}}
	mixtralMoENaming = moeNaming{"block_sparse_moe", [3]string{"w1", "w3", "w2"}}
)

// expertStacker is implemented by sources that can assemble stacked
// experts out of per-expert tensors (HF naming). It is kept out of Source
// so that synthetic sources, which produce stacked experts directly, need
// not implement it.
type expertStacker interface {
	StackedLinear(modules []string, out, in int) (backend.Weight, error)
}

// StackedLinear stacks per-expert checkpoint tensors (see
// weights.Checkpoint.StackLinear) and uploads the result as one weight.
func (c *checkpointSource) StackedLinear(modules []string, out, in int) (backend.Weight, error) {
	h, err := c.ck.StackLinear(modules, out, in)
	if err != nil {
		return nil, err
	}
	return c.upload(h)
}

// expertSharder is a source that holds only some of each MoE block's
// experts (expert parallelism, parallel.go): the router stays whole.
type expertSharder interface {
	ExpertRange() (lo, hi int)
}

// LoadMoE reads layer's MoE block: the router [experts, hidden] and the
// experts' gate/up [experts, inter, hidden] and down [experts, hidden,
// inter], stacked in the checkpoint (MLX switch_mlp) or per expert (HF).
// From an expertSharder it loads only that source's experts.
func LoadMoE(src Source, layer string, nm moeNaming, hidden, inter, experts int, p backend.MoEParams) (*MoE, error) {
	if experts <= 0 || p.TopK <= 0 || p.TopK > experts {
		return nil, fmt.Errorf("%s: num_experts_per_tok %d must be in 1..num_experts (%d)", layer, p.TopK, experts)
	}
	if inter <= 0 {
		return nil, fmt.Errorf("%s: expert intermediate size %d must be positive", layer, inter)
	}
	pre := layer + "." + nm.block
	m := &MoE{Params: p}
	var err error
	if m.Router, err = src.Linear(pre+".gate", experts, hidden); err != nil {
		return nil, err
	}
	lo, hi := 0, experts
	if es, ok := src.(expertSharder); ok {
		lo, hi = es.ExpertRange()
	}
	m.Experts.Lo = lo
	dst := []*backend.Weight{&m.Experts.Gate, &m.Experts.Up, &m.Experts.Down}
	shapes := [3][2]int{{inter, hidden}, {inter, hidden}, {hidden, inter}}
	if src.Has(pre + ".switch_mlp.gate_proj.weight") {
		for j, name := range []string{"gate_proj", "up_proj", "down_proj"} {
			if *dst[j], err = src.Linear(pre+".switch_mlp."+name, hi-lo, shapes[j][0], shapes[j][1]); err != nil {
				return nil, err
			}
		}
		return m, nil
	}
	if src.Has(pre + ".experts.gate_up_proj") {
		if lo != 0 || hi != experts {
			return nil, fmt.Errorf("%s: fused gate_up_proj experts do not split by expert yet (tensor parallelism)", layer)
		}
		if err := loadFusedExperts(src, pre+".experts", &m.Experts, experts, hidden, inter); err != nil {
			return nil, err
		}
		return m, nil
	}
	st, ok := src.(expertStacker)
	if !ok {
		return nil, fmt.Errorf("%s: no %s.switch_mlp experts, and this weight source cannot stack per-expert tensors", layer, nm.block)
	}
	for j, name := range nm.hf {
		mods := make([]string, 0, hi-lo)
		for e := lo; e < hi; e++ {
			mods = append(mods, fmt.Sprintf("%s.experts.%d.%s", pre, e, name))
		}
		if *dst[j], err = st.StackedLinear(mods, shapes[j][0], shapes[j][1]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func buildQwen3MoE(cfg *weights.Config, src Source, m *Model) error {
	act, err := activation(cfg.HiddenAct)
	if err != nil {
		return err
	}
	if cfg.DecoderSparseStep <= 0 {
		return fmt.Errorf("decoder_sparse_step %d must be positive", cfg.DecoderSparseStep)
	}
	// Softmax over all experts, then top-k; renormalising the kept
	// probabilities is optional (norm_topk_prob, true for released models).
	p := backend.MoEParams{TopK: cfg.TopK, Renorm: cfg.NormTopKProb, Act: act}
	return buildLlamaWith(cfg, src, m, func(i int, prefix string) (FFN, error) {
		if !cfg.SparseLayer(i) {
			return LoadMLP(src, prefix+".mlp", cfg.Hidden, cfg.Intermediate, act)
		}
		return LoadMoE(src, prefix, qwenMoENaming, cfg.Hidden, cfg.MoEIntermediate, cfg.NumExperts, p)
	})
}

func buildMixtral(cfg *weights.Config, src Source, m *Model) error {
	act, err := activation(cfg.HiddenAct)
	if err != nil {
		return err
	}
	// Mixtral's softmax over the selected experts' logits equals a softmax
	// over all experts renormalised over the top k. Every layer is MoE and
	// each expert is intermediate_size wide.
	p := backend.MoEParams{TopK: cfg.TopK, Renorm: true, Act: act}
	// Mixtral's sliding_window applies to every layer (llamaWindows).
	return buildLlamaWith(cfg, src, m, func(i int, prefix string) (FFN, error) {
		return LoadMoE(src, prefix, mixtralMoENaming, cfg.Hidden, cfg.Intermediate, cfg.NumExperts, p)
	})
}
