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
// module would otherwise add it N times (vLLM's RowParallelLinear).
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
	if t.Axis == Rows {
		b.Axis, b.Ranges = Rows, t.Ranges
	} else {
		b.Rank0 = true
	}
	return b, true
}

// families lists the model_types whose layers the plan knows: the
// Llama family's dense decoders (internal/model/llama.go).
var families = map[string]bool{"llama": true, "qwen2": true, "qwen3": true, "mistral": true}

// New plans cfg over n ranks. It refuses, naming the reason, a split
// that does not give every rank whole heads, whole quantization groups
// or an equal share of the MLP.
func New(cfg *weights.Config, n int) (*Plan, error) {
	if n < 1 {
		return nil, fmt.Errorf("tensor parallel size %d: must be at least 1", n)
	}
	mt := cfg.ModelType
	if t, ok := cfg.Raw["text_model_type"].(string); ok {
		mt = t
	}
	if !families[mt] || cfg.NumExperts > 0 {
		return nil, fmt.Errorf("tensor parallelism is not implemented for %s models yet (only dense llama, qwen2, qwen3, mistral)", cfg.ModelType)
	}
	if cfg.Quant.Default != nil && cfg.Quant.Default.Mode != "" && cfg.Quant.Default.Mode != "affine" {
		return nil, fmt.Errorf("tensor parallelism is not implemented for %s-quantized weights yet", cfg.Quant.Default.Mode)
	}
	h, kv, inter := cfg.Heads, cfg.KVHeads, cfg.Intermediate
	if h%n != 0 {
		return nil, fmt.Errorf("%d attention heads do not split over %d ranks", h, n)
	}
	// vLLM's rule: kv heads split when there are at least as many as
	// ranks, else each is replicated on n/kv ranks (every rank holds one).
	if kv%n != 0 && n%kv != 0 {
		return nil, fmt.Errorf("%d kv heads neither split over nor replicate evenly on %d ranks", kv, n)
	}
	if inter%n != 0 {
		return nil, fmt.Errorf("intermediate size %d does not split over %d ranks", inter, n)
	}
	p := &Plan{Ranks: n, byName: map[string]*Tensor{}}
	even := func(total, unit int) [][2]int {
		r := make([][2]int, n)
		for i := range r {
			r[i] = [2]int{i * total / n * unit, (i + 1) * total / n * unit}
		}
		return r
	}
	kvRanges := make([][2]int, n)
	for i := range kvRanges {
		lo := i * kv / n // with kv < n, rank i serves kv head i/(n/kv)
		hi := max((i+1)*kv/n, lo+1)
		kvRanges[i] = [2]int{lo * cfg.HeadDim, hi * cfg.HeadDim}
	}
	vocab := even(cfg.Vocab, 1) // uneven vocabularies split as evenly as they can
	for i := range n {
		p.Rank = append(p.Rank, Rank{Heads: h / n, KVHeads: max(kv/n, 1), Intermediate: inter / n,
			VocabLo: vocab[i][0], VocabHi: vocab[i][1]})
	}
	hid, qd, kd := cfg.Hidden, h*cfg.HeadDim, kv*cfg.HeadDim
	add := func(name string, axis Axis, ranges [][2]int, linear bool, shape ...int) {
		t := &Tensor{Name: name, Shape: shape, Axis: axis, Ranges: ranges, Linear: linear}
		p.Tensors = append(p.Tensors, t)
		p.byName[name] = t
	}
	add("model.embed_tokens", Rows, vocab, true, cfg.Vocab, hid)
	for i := range cfg.Layers {
		pre := fmt.Sprintf("model.layers.%d.", i)
		add(pre+"input_layernorm.weight", Replicated, nil, false, hid)
		add(pre+"self_attn.q_proj", Rows, even(h, cfg.HeadDim), true, qd, hid)
		add(pre+"self_attn.k_proj", Rows, kvRanges, true, kd, hid)
		add(pre+"self_attn.v_proj", Rows, kvRanges, true, kd, hid)
		add(pre+"self_attn.o_proj", Cols, even(h, cfg.HeadDim), true, hid, qd)
		add(pre+"post_attention_layernorm.weight", Replicated, nil, false, hid)
		add(pre+"mlp.gate_proj", Rows, even(inter, 1), true, inter, hid)
		add(pre+"mlp.up_proj", Rows, even(inter, 1), true, inter, hid)
		add(pre+"mlp.down_proj", Cols, even(inter, 1), true, hid, inter)
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
