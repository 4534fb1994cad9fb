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
	// Pieces, when set, replaces Ranges: rank r's shard is the rows of
	// Pieces[r] one after the other (Qwen3.5's in_proj_qkv and conv hold
	// q, k and v side by side, each split by its heads).
	Pieces [][][2]int
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
		s[int(t.Axis)-1] = 0
		for _, b := range t.pieces(r) {
			s[int(t.Axis)-1] += b[1] - b[0]
		}
	}
	return s
}

// pieces is rank r's ranges along Axis, in order.
func (t *Tensor) pieces(r int) [][2]int {
	if t.Pieces != nil {
		return t.Pieces[r]
	}
	return t.Ranges[r : r+1]
}

// Rank is the geometry one rank's model is built with.
type Rank struct {
	Heads, KVHeads, Intermediate int
	LinearKHeads, LinearVHeads   int // Qwen3.5's linear-attention key and value heads
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
	"qwen3_moe": "mlp", "mixtral": "block_sparse_moe", "gpt_oss": "mlp", "gemma3_text": "", "gemma3": "", "gemma4_text": "", "gemma4": "",
	"qwen3_5_text": "", "qwen3_5": ""}

// Layer is one decoder layer's geometry as its family builds it.
type Layer struct {
	HeadDim, KVHeads int
	// MoE: a routed block of whole experts (expert parallel) in place of
	// the dense MLP.
	MoE bool
	// GatedQ: q_proj holds each head's query rows then its output-gate
	// rows (Qwen3.5's full attention): twice the rows, split by head.
	GatedQ bool
	// DeltaNet: a Gated DeltaNet linear-attention layer (Qwen3.5) in
	// place of self_attn.
	DeltaNet *DeltaNet
}

// DeltaNet is a Qwen3.5 linear-attention layer's geometry. Value head h
// reads key head h/(VHeads/KHeads), so contiguous shares of both keep
// each rank's value heads with their key heads.
type DeltaNet struct {
	KHeads, VHeads, KDim, VDim int
	ConvShape                  []int // conv1d.weight as stored: [channels, 1, kernel] or mlx-lm's [channels, kernel, 1]
}

// New plans cfg over n ranks, every layer with the config's head dim and
// kv heads and Qwen3-MoE's rule for which layers are MoE (Config.SparseLayer).
func New(cfg *weights.Config, n int) (*Plan, error) {
	if mt := cfg.ModelType; mt == "gemma4" || mt == "gemma4_text" || mt == "qwen3_5" || mt == "qwen3_5_text" {
		// Gemma 4's full layers' head dim and kv heads differ, Qwen3.5's
		// linear layers are not attention (model.planParallel).
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
		return nil, fmt.Errorf("tensor parallelism is not implemented for %s models yet (only llama, qwen2, qwen3, mistral, qwen3_moe, mixtral, gpt_oss, gemma3, gemma4 and qwen3_5 dense)", cfg.ModelType)
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
		if d := l.DeltaNet; d != nil && (d.KHeads%n != 0 || d.VHeads%n != 0) {
			// Replicating key heads as kv heads are would need each
			// rank's value heads to read a shared key head's conv channels.
			return nil, fmt.Errorf("layer %d: linear attention's %d key and %d value heads do not both split over %d ranks", i, d.KHeads, d.VHeads, n)
		}
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
	var lin DeltaNet
	for _, l := range layers {
		if l.DeltaNet != nil {
			lin = *l.DeltaNet
		}
	}
	for i := range n {
		p.Rank = append(p.Rank, Rank{Heads: h / n, KVHeads: max(cfg.KVHeads/n, 1), Intermediate: rankInter,
			LinearKHeads: lin.KHeads / n, LinearVHeads: lin.VHeads / n,
			VocabLo: vocab[i][0], VocabHi: vocab[i][1], ExpertLo: exp[i][0], ExpertHi: exp[i][1]})
	}
	hid := cfg.Hidden
	add := p.add
	add("model.embed_tokens", Rows, vocab, true, cfg.Vocab, hid)
	for i, l := range layers {
		pre := fmt.Sprintf("model.layers.%d.", i)
		qd, kd := h*l.HeadDim, l.KVHeads*l.HeadDim
		add(pre+"input_layernorm.weight", Replicated, nil, false, hid)
		if d := l.DeltaNet; d != nil {
			p.addDeltaNet(pre+"linear_attn.", *d, hid, even)
		} else if l.GatedQ {
			add(pre+"self_attn.q_proj", Rows, even(h, 2*l.HeadDim), true, 2*qd, hid)
		} else {
			add(pre+"self_attn.q_proj", Rows, even(h, l.HeadDim), true, qd, hid)
		}
		if l.DeltaNet == nil {
			add(pre+"self_attn.k_proj", Rows, kvRanges(l.KVHeads, l.HeadDim), true, kd, hid)
			add(pre+"self_attn.v_proj", Rows, kvRanges(l.KVHeads, l.HeadDim), true, kd, hid)
			add(pre+"self_attn.o_proj", Cols, even(h, l.HeadDim), true, hid, qd)
		}
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

// addDeltaNet plans a linear-attention layer by heads: in_proj_qkv and
// the depthwise conv hold q, k (key heads) and v (value heads) side by
// side, each cut by its own heads; z, a, b, A_log and dt_bias by value
// head; out_proj by its value-head input columns (row parallel, an
// all-reduce after it); the gated norm, one per head width, replicated.
func (p *Plan) addDeltaNet(pre string, d DeltaNet, hid int, even func(total, unit int) [][2]int) {
	qk, vw := d.KHeads*d.KDim, d.VHeads*d.VDim
	q, k, v := even(d.KHeads, d.KDim), even(d.KHeads, d.KDim), even(d.VHeads, d.VDim)
	pieces := make([][][2]int, p.Ranks)
	for r := range pieces {
		pieces[r] = [][2]int{q[r], {qk + k[r][0], qk + k[r][1]}, {2*qk + v[r][0], 2*qk + v[r][1]}}
	}
	add := p.add
	add(pre+"in_proj_qkv", Rows, nil, true, 2*qk+vw, hid).Pieces = pieces
	add(pre+"conv1d.weight", Rows, nil, false, d.ConvShape...).Pieces = pieces
	add(pre+"in_proj_z", Rows, v, true, vw, hid)
	add(pre+"in_proj_a", Rows, even(d.VHeads, 1), true, d.VHeads, hid)
	add(pre+"in_proj_b", Rows, even(d.VHeads, 1), true, d.VHeads, hid)
	add(pre+"A_log", Rows, even(d.VHeads, 1), false, d.VHeads)
	add(pre+"dt_bias", Rows, even(d.VHeads, 1), false, d.VHeads)
	add(pre+"norm.weight", Replicated, nil, false, d.VDim)
	add(pre+"out_proj", Cols, v, true, hid, vw)
}

func (p *Plan) add(name string, axis Axis, ranges [][2]int, linear bool, shape ...int) *Tensor {
	t := &Tensor{Name: name, Shape: shape, Axis: axis, Ranges: ranges, Linear: linear}
	p.Tensors = append(p.Tensors, t)
	p.byName[name] = t
	return t
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
