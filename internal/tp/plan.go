// Package tp plans tensor parallelism: for a model config and N ranks,
// which checkpoint tensors each rank holds, split along which axis. It
// knows no backend: the loader slices host tensors by the plan (Slice),
// and the model code adds the collectives (docs/tensor-parallel.md).
//
// The split follows Megatron-LM as vLLM implements it: q/k/v and
// gate/up are column-parallel (split by output rows, whole heads), o_proj
// and down_proj row-parallel (split by input columns, followed by an
// all-reduce), the embedding and LM head split by vocabulary, everything
// else replicated. Each layer then needs one all-reduce after attention
// and one after the MLP, and nothing moves between the two projections
// of a pair.
package tp

import (
	"fmt"
	"strings"

	"github.com/mlxcel/mlxcel/internal/weights"
)

// Axis is the dimension a tensor is split along.
type Axis int

const (
	// Replicated: every rank holds the whole tensor.
	Replicated Axis = iota
	// Rows splits dimension 0: a linear's output features (column
	// parallel in Megatron's words) or a table's vocabulary.
	Rows
	// Cols splits dimension 1: a linear's input features (row parallel).
	Cols
)

func (a Axis) String() string {
	return [...]string{"replicated", "rows", "cols"}[a]
}

// Tensor is one planned checkpoint module or tensor.
type Tensor struct {
	Name  string // a linear's module ("model.layers.0.mlp.up_proj") or a dense tensor's name
	Shape []int  // the full logical shape
	Axis  Axis
	// Ranges[r] is rank r's [lo, hi) along Axis (nil when replicated).
	// Ranks may share a range: kv heads are replicated when there are
	// fewer of them than ranks.
	Ranges [][2]int
	// Linear: loaded with Source.Linear (possibly quantized).
	Linear bool
	// Rank0: replicated, but only rank 0 holds it (Bias).
	Rank0 bool
}

// Range is rank r's slice of t: its bounds along t.Axis, or the whole
// tensor when replicated.
func (t *Tensor) Range(r int) (lo, hi int) {
	if t.Axis == Replicated {
		return 0, 0
	}
	return t.Ranges[r][0], t.Ranges[r][1]
}

// ShardShape is the shape rank r holds.
func (t *Tensor) ShardShape(r int) []int {
	s := append([]int(nil), t.Shape...)
	if t.Axis != Replicated {
		s[int(t.Axis)-1] = t.Ranges[r][1] - t.Ranges[r][0]
	}
	return s
}

// Rank is the geometry one rank's model is built with.
type Rank struct {
	Heads, KVHeads, Intermediate int
	VocabLo, VocabHi             int // the rank's vocabulary rows [lo, hi)
	ExpertLo, ExpertHi           int // the rank's experts [lo, hi) of every MoE layer
}

// Plan is the sharding of one model over Ranks ranks.
type Plan struct {
	Ranks   int
	Rank    []Rank
	Tensors []*Tensor // in load order
	byName  map[string]*Tensor
}

// Lookup returns the planned tensor of a linear module or dense tensor
// name. Names the plan does not list are replicated dense tensors
// (per-head q/k norms) or biases (Bias).
func (p *Plan) Lookup(name string) (*Tensor, bool) {
	t, ok := p.byName[name]
	return t, ok
}

// Bias plans the bias tensor name (<module>.bias) of a planned linear.
// A column-parallel module's bias splits with its rows; a row-parallel
// one's is held by rank 0 only (Rank0), since the all-reduce after the
// module would otherwise add it N times (vLLM's RowParallelLinear). A
// replicated module's bias is replicated.
func (p *Plan) Bias(name string) (*Tensor, bool) {
	mod, ok := strings.CutSuffix(name, ".bias")
	if !ok {
		return nil, false
	}
	t, ok := p.byName[mod]
	if !ok || !t.Linear {
		return nil, false
	}
	b := &Tensor{Name: name, Shape: []int{t.Shape[0]}}
	switch t.Axis {
	case Rows:
		b.Axis, b.Ranges = Rows, t.Ranges
	case Cols:
		b.Rank0 = true
	} // a replicated module's (gpt-oss's router) is replicated with it
	return b, true
}

// families lists the model_types whose layers the plan knows, with the
// module a MoE layer keeps its router and experts under: the Llama
// family's decoders (internal/model/llama.go, moe.go) and Gemma 3's and 4's
// dense ones (gemma.go), whose linears have the same names.
var families = map[string]string{"llama": "", "qwen2": "", "qwen3": "", "mistral": "",
	"qwen3_moe": "mlp", "mixtral": "block_sparse_moe", "gpt_oss": "mlp", "gemma3_text": "", "gemma3": "", "gemma4_text": "", "gemma4": ""}

// Layer is one decoder layer's geometry as its family builds it.
type Layer struct {
	HeadDim, KVHeads int
	// MoE: a routed block of whole experts (expert parallel) in place of
	// the dense MLP.
	MoE bool
}

// New plans cfg over n ranks, every layer with the config's head dim and
// kv heads and Qwen3-MoE's rule for which layers are MoE (Config.SparseLayer).
func New(cfg *weights.Config, n int) (*Plan, error) {
	if mt := cfg.ModelType; mt == "gemma4" || mt == "gemma4_text" {
		// Its full layers' head dim and kv heads differ (model.planParallel).
		return nil, fmt.Errorf("%s needs its per-layer geometry planned (NewLayers)", mt)
	}
	layers := make([]Layer, cfg.Layers)
	for i := range layers {
		layers[i] = Layer{HeadDim: cfg.HeadDim, KVHeads: cfg.KVHeads, MoE: cfg.SparseLayer(i)}
	}
	return NewLayers(cfg, n, layers)
}

// NewLayers plans cfg over n ranks with the given per-layer geometry
// (Gemma 4's full layers have their own head dim and kv heads). It
// refuses, naming the reason, a split that does not give every rank
// whole heads, whole quantization groups, an equal share of the MLP or
// an equal number of whole experts.
func NewLayers(cfg *weights.Config, n int, layers []Layer) (*Plan, error) {
	if n < 1 {
		return nil, fmt.Errorf("tensor parallel size %d: must be at least 1", n)
	}
	mt := cfg.ModelType
	if t, ok := cfg.Raw["text_model_type"].(string); ok {
		mt = t
	}
	moeBlock, known := families[mt]
	if !known || (cfg.NumExperts > 0 && moeBlock == "") {
		return nil, fmt.Errorf("tensor parallelism is not implemented for %s models yet (only llama, qwen2, qwen3, mistral, qwen3_moe, mixtral, gemma3, gemma4 dense)", cfg.ModelType)
	}
	if cfg.Quant.Default != nil && cfg.Quant.Default.Mode != "" && cfg.Quant.Default.Mode != "affine" {
		return nil, fmt.Errorf("tensor parallelism is not implemented for %s-quantized weights yet", cfg.Quant.Default.Mode)
	}
	if len(layers) != cfg.Layers {
		return nil, fmt.Errorf("%d layer geometries for %d layers", len(layers), cfg.Layers)
	}
	h, inter, experts := cfg.Heads, cfg.Intermediate, cfg.NumExperts
	if h%n != 0 {
		return nil, fmt.Errorf("%d attention heads do not split over %d ranks", h, n)
	}
	dense := false
	for i, l := range layers {
		// vLLM's rule: kv heads split when there are at least as many as
		// ranks, else each is replicated on n/kv ranks (every rank holds one).
		if l.KVHeads <= 0 || l.KVHeads%n != 0 && n%l.KVHeads != 0 {
			return nil, fmt.Errorf("layer %d: %d kv heads neither split over nor replicate evenly on %d ranks", i, l.KVHeads, n)
		}
		dense = dense || !l.MoE
	}
	if dense && inter%n != 0 {
		return nil, fmt.Errorf("intermediate size %d does not split over %d ranks", inter, n)
	}
	// Expert parallel: each rank holds whole experts and the whole router
	// (docs/tensor-parallel.md says why not a split of each expert).
	if experts > 0 && experts%n != 0 {
		return nil, fmt.Errorf("%d experts do not split over %d ranks", experts, n)
	}
	p := &Plan{Ranks: n, byName: map[string]*Tensor{}}
	even := func(total, unit int) [][2]int {
		r := make([][2]int, n)
		for i := range r {
			r[i] = [2]int{i * total / n * unit, (i + 1) * total / n * unit}
		}
		return r
	}
	kvRanges := func(kv, headDim int) [][2]int {
		r := make([][2]int, n)
		for i := range r {
			lo := i * kv / n // with kv < n, rank i serves kv head i/(n/kv)
			hi := max((i+1)*kv/n, lo+1)
			r[i] = [2]int{lo * headDim, hi * headDim}
		}
		return r
	}
	vocab := even(cfg.Vocab, 1) // uneven vocabularies split as evenly as they can
	exp := even(experts, 1)
	rankInter := inter
	if dense {
		rankInter = inter / n
	}
	for i := range n {
		p.Rank = append(p.Rank, Rank{Heads: h / n, KVHeads: max(cfg.KVHeads/n, 1), Intermediate: rankInter,
			VocabLo: vocab[i][0], VocabHi: vocab[i][1], ExpertLo: exp[i][0], ExpertHi: exp[i][1]})
	}
	hid := cfg.Hidden
	add := func(name string, axis Axis, ranges [][2]int, linear bool, shape ...int) {
		t := &Tensor{Name: name, Shape: shape, Axis: axis, Ranges: ranges, Linear: linear}
		p.Tensors = append(p.Tensors, t)
		p.byName[name] = t
	}
	add("model.embed_tokens", Rows, vocab, true, cfg.Vocab, hid)
	for i, l := range layers {
		pre := fmt.Sprintf("model.layers.%d.", i)
		qd, kd := h*l.HeadDim, l.KVHeads*l.HeadDim
		add(pre+"input_layernorm.weight", Replicated, nil, false, hid)
		add(pre+"self_attn.q_proj", Rows, even(h, l.HeadDim), true, qd, hid)
		add(pre+"self_attn.k_proj", Rows, kvRanges(l.KVHeads, l.HeadDim), true, kd, hid)
		add(pre+"self_attn.v_proj", Rows, kvRanges(l.KVHeads, l.HeadDim), true, kd, hid)
		add(pre+"self_attn.o_proj", Cols, even(h, l.HeadDim), true, hid, qd)
		add(pre+"post_attention_layernorm.weight", Replicated, nil, false, hid)
		if !l.MoE {
			add(pre+"mlp.gate_proj", Rows, even(inter, 1), true, inter, hid)
			add(pre+"mlp.up_proj", Rows, even(inter, 1), true, inter, hid)
			add(pre+"mlp.down_proj", Cols, even(inter, 1), true, hid, inter)
			continue
		}
		// Stacked experts [experts, out, in] split by expert (MLX's
		// switch_mlp; per-expert checkpoints are stacked per rank by the
		// loader, which checks the experts against ExpertLo/Hi).
		ei := cfg.MoEIntermediate
		if mt == "mixtral" || mt == "gpt_oss" {
			ei = inter // their experts are intermediate_size wide
		}
		blk := pre + moeBlock + "."
		if mt == "gpt_oss" {
			// Attention sinks, one logit per head, split with the heads;
			// a biased router; HF's fused experts read on the host,
			// [E, in, out], split by expert like their biases.
			add(pre+"self_attn.sinks", Rows, even(h, 1), false, h)
			add(blk+"router", Replicated, nil, true, experts, hid)
			add(blk+"experts.gate_up_proj", Rows, exp, false, experts, hid, 2*ei)
			add(blk+"experts.gate_up_proj_bias", Rows, exp, false, experts, 2*ei)
			add(blk+"experts.down_proj", Rows, exp, false, experts, ei, hid)
			add(blk+"experts.down_proj_bias", Rows, exp, false, experts, hid)
			continue
		}
		add(blk+"gate", Replicated, nil, true, experts, hid)
		add(blk+"switch_mlp.gate_proj", Rows, exp, true, experts, ei, hid)
		add(blk+"switch_mlp.up_proj", Rows, exp, true, experts, ei, hid)
		add(blk+"switch_mlp.down_proj", Rows, exp, true, experts, hid, ei)
	}
	add("model.norm.weight", Replicated, nil, false, hid)
	add("lm_head", Rows, vocab, true, cfg.Vocab, hid)
	for _, t := range p.Tensors {
		if err := checkGroups(cfg, t); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// checkGroups refuses an input-column split that would cut a
// quantization group or a packed 32-bit word of a quantized module.
// Row splits move whole rows, which hold whole groups.
func checkGroups(cfg *weights.Config, t *Tensor) error {
	if t.Axis != Cols {
		return nil
	}
	q, ok := cfg.Quant.For(t.Name)
	if !ok || q.GroupSize <= 0 {
		return nil
	}
	for r, b := range t.Ranges {
		if err := groupAligned(t.Name, b[0], b[1], q.GroupSize, q.Bits); err != nil {
			return fmt.Errorf("rank %d of %d: %v", r, len(t.Ranges), err)
		}
	}
	return nil
}

// groupAligned checks columns [lo, hi) of a quantized matrix.
func groupAligned(name string, lo, hi, group, bits int) error {
	if lo%group != 0 || hi%group != 0 || lo*bits%32 != 0 {
		return fmt.Errorf("%s: input columns [%d, %d) would cut its quantization groups of %d", name, lo, hi, group)
	}
	return nil
}
