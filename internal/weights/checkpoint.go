package weights

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// Checkpoint is every tensor of a model directory, under canonical names
// (HF naming: "model.layers.N...", "lm_head"), whatever prefix the
// checkpoint used (multimodal "language_model.model.", MLX
// "model.language_model.").
type Checkpoint struct {
	Dir     string
	Quant   QuantConfig
	Skipped []string // tensors of towers this text-only engine does not run
	files   []*File
	entries map[string]entry
	ignored map[string]bool // see Ignore
}

type entry struct {
	file *File
	info TensorInfo
}

// prefixes maps checkpoint name prefixes to canonical ones, longest first.
var prefixes = [][2]string{
	{"model.language_model.", "model."},
	{"language_model.model.", "model."},
	{"language_model.lm_head.", "lm_head."},
	{"language_model.", ""},
}

// skippedTowers are multimodal parts that a text decoder does not use,
// and Qwen3.5's multi-token-prediction head (mtp.*, for speculative
// decoding; transformers and mlx-lm drop it too).
var skippedTowers = []string{"vision_tower.", "audio_tower.", "multi_modal_projector.", "embed_vision.", "embed_audio.",
	"model.vision_tower.", "model.audio_tower.", "model.multi_modal_projector.", "model.embed_vision.", "model.embed_audio.", "vision_model.",
	"model.visual.", "visual.", "mtp."}

// Canonical maps a checkpoint tensor name to the HF text-model name.
func Canonical(name string) string {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p[0]) {
			return p[1] + name[len(p[0]):]
		}
	}
	return name
}

// Open maps the checkpoint's weight files in dir: the shards that
// model.safetensors.index.json names, else model*.safetensors. Other
// safetensors in the folder are not the model's (Mistral repos ship a
// duplicate consolidated.safetensors, test fixtures their reference
// outputs), so they are never read.
func Open(dir string, q QuantConfig) (*Checkpoint, error) {
	paths, err := WeightFiles(dir)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Dir: dir, Quant: q, entries: map[string]entry{}}
	for _, p := range paths {
		f, err := OpenFile(p)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.files = append(c.files, f)
		for name, info := range f.Tensors {
			if hasAnyPrefix(name, skippedTowers) {
				c.Skipped = append(c.Skipped, name)
				continue
			}
			cn := Canonical(name)
			if prev, dup := c.entries[cn]; dup {
				c.Close()
				return nil, fmt.Errorf("%s: tensor %s also in %s", p, name, prev.file.Path)
			}
			c.entries[cn] = entry{f, info}
		}
	}
	return c, nil
}

// WeightFiles lists the checkpoint's safetensors files, sorted: what Open
// maps, and what size estimates should add up.
func WeightFiles(dir string) ([]string, error) {
	idx := filepath.Join(dir, "model.safetensors.index.json")
	b, err := os.ReadFile(idx)
	if err != nil {
		paths, _ := filepath.Glob(filepath.Join(dir, "model*.safetensors"))
		if len(paths) == 0 {
			others, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
			for i, o := range others {
				others[i] = filepath.Base(o)
			}
			return nil, fmt.Errorf("%s: no model.safetensors.index.json or model*.safetensors (other safetensors files are not read: %v)", dir, others)
		}
		return paths, nil
	}
	var ix struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &ix); err != nil {
		return nil, fmt.Errorf("%s: %v", idx, err)
	}
	var paths []string
	seen := map[string]bool{}
	for _, f := range ix.WeightMap {
		if strings.Contains(f, "/") || strings.Contains(f, "..") {
			return nil, fmt.Errorf("%s: shard name %q escapes the model directory", idx, f)
		}
		if !seen[f] {
			seen[f] = true
			paths = append(paths, filepath.Join(dir, f))
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: weight_map names no files", idx)
	}
	sort.Strings(paths)
	return paths, nil
}

// leftovers are tensors checkpoints carry that no forward pass reads:
// rotary inverse frequencies saved by older transformers versions (the
// engine computes them from the config).
var leftovers = []string{".rotary_emb.inv_freq"}

// Unused lists the canonical names of tensors no one read (Dense, Linear,
// StackLinear or the quantized readers) and nobody declared ignored:
// after a model is built, each one is a weight the model would silently
// drop. Skipped towers and known leftovers are not listed.
func (c *Checkpoint) Unused() []string {
	var out []string
	for name, e := range c.entries {
		if !e.file.wasRead(e.info.Name) && !c.ignored[name] && !hasAnySuffix(name, leftovers) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Ignore declares tensors a model knowingly does not use (a stored
// lm_head that tie_word_embeddings replaces by the embedding).
func (c *Checkpoint) Ignore(names ...string) {
	if c.ignored == nil {
		c.ignored = map[string]bool{}
	}
	for _, n := range names {
		c.ignored[n] = true
	}
}

func hasAnySuffix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasSuffix(s, p) {
			return true
		}
	}
	return false
}

func hasAnyPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Close unmaps the files. Host views handed out become invalid.
func (c *Checkpoint) Close() error {
	for _, f := range c.files {
		f.Close()
	}
	c.files = nil
	return nil
}

// Has reports whether the canonical tensor name exists.
func (c *Checkpoint) Has(name string) bool { _, ok := c.entries[name]; return ok }

// Names lists canonical tensor names, sorted.
func (c *Checkpoint) Names() []string {
	out := make([]string, 0, len(c.entries))
	for n := range c.entries {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Info returns a tensor's header entry and the file holding it.
func (c *Checkpoint) Info(name string) (TensorInfo, string, bool) {
	e, ok := c.entries[name]
	if !ok {
		return TensorInfo{}, "", false
	}
	return e.info, e.file.Path, true
}

func (c *Checkpoint) where(name string) string {
	if e, ok := c.entries[name]; ok {
		return filepath.Base(e.file.Path)
	}
	var names []string
	for _, f := range c.files {
		names = append(names, filepath.Base(f.Path))
	}
	return filepath.Join(c.Dir, strings.Join(names, ","))
}

// Dense returns a float tensor (any float dtype) of exactly the given shape.
func (c *Checkpoint) Dense(name string, shape ...int) (*tensor.Host, error) {
	e, ok := c.entries[name]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %s is missing", c.where(name), name)
	}
	if !e.info.DType.IsFloat() {
		return nil, fmt.Errorf("%s: tensor %s has dtype %s, want a float type", filepath.Base(e.file.Path), name, e.info.DType)
	}
	if !sameShape(e.info.Shape, shape) {
		return nil, fmt.Errorf("%s: tensor %s has shape %v, want %v", filepath.Base(e.file.Path), name, e.info.Shape, shape)
	}
	return &tensor.Host{Name: name, Shape: shape, DType: e.info.DType, Data: e.file.Bytes(e.info)}, nil
}

// Linear returns the weight of module (e.g. "model.layers.0.mlp.up_proj")
// with logical shape shape ([out, in] or [experts, out, in]). It is
// quantized iff <module>.scales exists; bits and group come from the
// config's per-module override or default, checked against the packed
// width.
func (c *Checkpoint) Linear(module string, shape ...int) (*tensor.Host, error) {
	wname := module + ".weight"
	if !c.Has(module + ".scales") {
		return c.Dense(wname, shape...)
	}
	e, ok := c.entries[wname]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %s is missing (have %s.scales)", c.where(module+".scales"), wname, module)
	}
	file := filepath.Base(e.file.Path)
	spec, quantized := c.Quant.For(module)
	if c.isFP(module, spec) {
		return c.fpLinear(module, spec, shape) // fpquant.go
	}
	if !quantized {
		// Checkpoints converted with a per-layer predicate may leave a
		// layer out of the config; infer from the shapes below.
		spec = QuantSpec{}
	}
	in := shape[len(shape)-1]
	lead := shape[:len(shape)-1]
	if e.info.DType != tensor.U32 {
		return nil, fmt.Errorf("%s: tensor %s has dtype %s, quantized weights must be U32", file, wname, e.info.DType)
	}
	if len(e.info.Shape) != len(shape) || !sameShape(e.info.Shape[:len(lead)], lead) {
		return nil, fmt.Errorf("%s: tensor %s has shape %v, want %v x packed", file, wname, e.info.Shape, lead)
	}
	packed := e.info.Shape[len(shape)-1]
	if spec.Bits == 0 || packed*32 != in*spec.Bits {
		// Infer bits from the packed width when the config is silent or
		// disagrees: in*bits/32 words per row.
		if packed*32%in != 0 {
			return nil, fmt.Errorf("%s: tensor %s has %d words per row, not a whole bit width for %d inputs", file, wname, packed, in)
		}
		spec.Bits = packed * 32 / in
	}
	sc, err := c.floatAux(module+".scales", lead, in, &spec)
	if err != nil {
		return nil, err
	}
	bi, err := c.floatAux(module+".biases", lead, in, &spec)
	if err != nil {
		return nil, err
	}
	if sc.DType != bi.DType {
		return nil, fmt.Errorf("%s: %s.scales is %s but .biases is %s", file, module, sc.DType, bi.DType)
	}
	switch spec.Bits {
	case 2, 3, 4, 5, 6, 8:
	default:
		return nil, fmt.Errorf("%s: tensor %s: %d-bit quantization is not supported", file, wname, spec.Bits)
	}
	return &tensor.Host{Name: wname, Shape: shape, DType: tensor.U32, Data: e.file.Bytes(e.info),
		Quant: &tensor.Quant{Bits: spec.Bits, GroupSize: spec.GroupSize, Scales: sc.Data, Biases: bi.Data, ScaleDType: sc.DType}}, nil
}

// floatAux loads .scales/.biases of shape lead x groups; it fixes the
// group size from the shape when the config does not give one.
func (c *Checkpoint) floatAux(name string, lead []int, in int, spec *QuantSpec) (*tensor.Host, error) {
	e, ok := c.entries[name]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %s is missing", c.where(name), name)
	}
	file := filepath.Base(e.file.Path)
	s := e.info.Shape
	if len(s) != len(lead)+1 || !sameShape(s[:len(lead)], lead) || s[len(lead)] <= 0 || in%s[len(lead)] != 0 {
		return nil, fmt.Errorf("%s: tensor %s has shape %v, want %v x groups", file, name, s, lead)
	}
	g := in / s[len(lead)]
	if spec.GroupSize == 0 {
		spec.GroupSize = g
	}
	if g != spec.GroupSize {
		return nil, fmt.Errorf("%s: tensor %s implies group size %d, config says %d", file, name, g, spec.GroupSize)
	}
	if !e.info.DType.IsFloat() || e.info.DType == tensor.F64 {
		return nil, fmt.Errorf("%s: tensor %s has dtype %s, want F16, BF16 or F32", file, name, e.info.DType)
	}
	return &tensor.Host{Name: name, Shape: s, DType: e.info.DType, Data: e.file.Bytes(e.info)}, nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
