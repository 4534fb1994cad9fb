// Package synthetic builds models with deterministic random weights of the
// exact shapes and quantization a config.json describes, for benchmarks of
// checkpoints that cannot be downloaded here. Throughput does not depend
// on weight values, so a synthetic Llama-3.1-8B runs the same kernels over
// the same bytes as the real one; results must still be labelled
// synthetic, because the text it generates is noise.
//
// Source implements model.Source: each tensor is generated when the
// model's builder asks for it and uploaded straight to the backend, so no
// multi-gigabyte file is ever written and at most one tensor is held on
// the host at a time.
package synthetic

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Options tune a Source.
type Options struct {
	// Seed changes every generated value; the same seed gives the same
	// weights whatever order the builder asks for them in.
	Seed uint64
	// Progress, when set, is called after each upload with the stored
	// bytes of the tensor (packed words + scales + biases).
	Progress func(name string, bytes int64)
}

// Source generates weights for cfg on demand and uploads them to be.
type Source struct {
	cfg  *weights.Config
	be   backend.Backend
	opts Options
	plan map[string]Tensor

	uploaded    int64
	unpredicted []string
}

// New plans cfg's tensors; it fails for architectures without a plan.
func New(cfg *weights.Config, be backend.Backend, opts Options) (*Source, error) {
	plan, err := Plan(cfg)
	if err != nil {
		return nil, err
	}
	s := &Source{cfg: cfg, be: be, opts: opts, plan: map[string]Tensor{}}
	for _, t := range plan {
		s.plan[t.Name] = t
	}
	return s, nil
}

// Has reports whether a real checkpoint of this config holds name.
func (s *Source) Has(name string) bool { _, ok := s.plan[name]; return ok }

// TensorShape is name's planned stored shape: a family that reads the
// checkpoint's layout off a shape (Qwen3.5's conv1d) sees mlx-lm's, which
// is the layout the plan is of.
func (s *Source) TensorShape(name string) ([]int, bool) {
	t, ok := s.plan[name]
	return slices.Clone(t.Shape), ok
}

// UploadedBytes is the stored size of everything handed out so far.
func (s *Source) UploadedBytes() int64 { return s.uploaded }

// Unpredicted lists tensors a builder asked for that the plan does not
// contain. They are generated anyway, but a real checkpoint would lack
// them, so a non-empty list means the plan or the family is out of date.
func (s *Source) Unpredicted() []string { return s.unpredicted }

// Linear generates and uploads module's weight of logical shape
// [.., out, in], quantized exactly as mlx_lm.convert would store it.
func (s *Source) Linear(module string, shape ...int) (backend.Weight, error) {
	h, err := s.HostLinear(module, shape...)
	if err != nil {
		return nil, err
	}
	return s.upload(h)
}

// Dense generates and uploads a float tensor (norms, biases, scalars).
func (s *Source) Dense(name string, shape ...int) (backend.Weight, error) {
	h, err := s.HostDense(name, shape...)
	if err != nil {
		return nil, err
	}
	return s.upload(h)
}

// UploadHost uploads a tensor the model derived from a HostDense one
// (Gemma 3's 1+w norms in float32), counted as the stored bytes of the
// tensor it came from.
func (s *Source) UploadHost(h *tensor.Host, stored int64) (backend.Weight, error) {
	w, err := backend.Upload(s.be, h)
	if err != nil {
		return nil, fmt.Errorf("synthetic %s: %v", h.Name, err)
	}
	s.uploaded += stored
	if s.opts.Progress != nil {
		s.opts.Progress(h.Name, stored)
	}
	return w, nil
}

func (s *Source) upload(h *tensor.Host) (backend.Weight, error) {
	w, err := backend.Upload(s.be, h)
	if err != nil {
		return nil, fmt.Errorf("synthetic %s: %v", h.Name, err)
	}
	n := int64(len(h.Data))
	if h.Quant != nil {
		n += int64(len(h.Quant.Scales) + len(h.Quant.Biases))
	}
	s.uploaded += n
	if s.opts.Progress != nil {
		s.opts.Progress(h.Name, n)
	}
	return w, nil
}

// check compares a request with the plan: a shape that differs from what
// the real checkpoint stores is an error (as loading it would be); a name
// the plan lacks is generated but remembered.
func (s *Source) check(name string, want []int) error {
	t, ok := s.plan[name]
	if !ok {
		s.unpredicted = append(s.unpredicted, name)
		return nil
	}
	if !slices.Equal(t.Shape, want) {
		return fmt.Errorf("synthetic: tensor %s has shape %v, want %v", name, t.Shape, want)
	}
	return nil
}

// targetStd is the standard deviation of generated matrix weights: a
// little under 1/sqrt(in), so each projection shrinks its input slightly
// and activations stay finite through any depth (the residual stream and
// RMSNorm keep them from vanishing).
func targetStd(in int) float64 { return 0.5 / math.Sqrt(float64(in)) }

// HostLinear builds module's host tensor without uploading it.
func (s *Source) HostLinear(module string, shape ...int) (*tensor.Host, error) {
	if len(shape) < 2 || slices.Min(shape) <= 0 {
		return nil, fmt.Errorf("synthetic: linear %s: bad shape %v", module, shape)
	}
	in := shape[len(shape)-1]
	spec, q := quantFor(s.cfg, module, in)
	if !q {
		if err := s.check(module+".weight", shape); err != nil {
			return nil, err
		}
		return s.denseHost(module+".weight", shape, uniformBF16(targetStd(in)*math.Sqrt(3))), nil
	}
	lead := shape[:len(shape)-1]
	rows := 1
	for _, d := range lead {
		rows *= d
	}
	if err := s.check(module+".weight", append(slices.Clone(lead), in*spec.Bits/32)); err != nil {
		return nil, err
	}
	r := newRNG(s.opts.Seed, module+".weight")
	data := make([]byte, rows*in*spec.Bits/8)
	r.fill(data)
	if quant.IsFP(spec.Mode) {
		return s.fpHost(module, shape, spec, data, rows*in/spec.GroupSize), nil
	}
	// Uniform random codes have std (2^bits)/sqrt(12) in units of the
	// scale; choose the scale for targetStd and centre the codes with the
	// bias so weights have mean zero. A +-25% jitter per group keeps the
	// scales from being one repeated value.
	levels := float64(int(1) << spec.Bits)
	base := targetStd(in) * math.Sqrt(12) / levels
	groups := rows * in / spec.GroupSize
	scales := make([]byte, 2*groups)
	biases := make([]byte, 2*groups)
	rs := newRNG(s.opts.Seed, module+".scales")
	for g := range groups {
		sc := base * (0.75 + 0.5*rs.float())
		binary.LittleEndian.PutUint16(scales[2*g:], tensor.F32ToBF16(float32(sc)))
		binary.LittleEndian.PutUint16(biases[2*g:], tensor.F32ToBF16(float32(-sc*(levels-1)/2)))
	}
	return &tensor.Host{Name: module + ".weight", Shape: slices.Clone(shape), DType: tensor.U32, Data: data,
		Quant: &tensor.Quant{Bits: spec.Bits, GroupSize: spec.GroupSize, Scales: scales, Biases: biases, ScaleDType: tensor.BF16}}, nil
}

// HostDense builds a float tensor: norm weights and scalars are 1 (as a
// freshly initialised model has them), biases small, anything else
// uniform with the matrix std.
func (s *Source) HostDense(name string, shape ...int) (*tensor.Host, error) {
	if len(shape) == 0 || slices.Min(shape) <= 0 {
		return nil, fmt.Errorf("synthetic: dense %s: bad shape %v", name, shape)
	}
	if err := s.check(name, shape); err != nil {
		return nil, err
	}
	last := name[strings.LastIndex(name, ".")+1:]
	mod := strings.TrimSuffix(name, "."+last)
	var fill func(r *rng) float32
	switch {
	case strings.HasSuffix(mod, "norm") || last == "layer_scalar":
		fill = func(*rng) float32 { return 1 }
	case last == "bias":
		fill = uniformBF16(0.02)
	default:
		fill = uniformBF16(targetStd(shape[len(shape)-1]) * math.Sqrt(3))
	}
	return s.denseHost(name, shape, fill), nil
}

func (s *Source) denseHost(name string, shape []int, fill func(*rng) float32) *tensor.Host {
	n := 1
	for _, d := range shape {
		n *= d
	}
	data := make([]byte, 2*n)
	r := newRNG(s.opts.Seed, name)
	for i := range n {
		binary.LittleEndian.PutUint16(data[2*i:], tensor.F32ToBF16(fill(r)))
	}
	return &tensor.Host{Name: name, Shape: slices.Clone(shape), DType: tensor.BF16, Data: data}
}

func uniformBF16(a float64) func(*rng) float32 {
	return func(r *rng) float32 { return float32((2*r.float() - 1) * a) }
}

// rng is splitmix64: fast enough to fill gigabytes of packed words in
// well under a second per gigabyte, and seeded per tensor name so a
// tensor's values do not depend on the order of requests.
type rng struct{ x uint64 }

func newRNG(seed uint64, name string) *rng {
	h := fnv.New64a()
	h.Write([]byte(name))
	return &rng{x: h.Sum64() ^ (seed * 0x9e3779b97f4a7c15)}
}

func (r *rng) next() uint64 {
	r.x += 0x9e3779b97f4a7c15
	z := r.x
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// float is uniform in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

func (r *rng) fill(b []byte) {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.next())
	}
	if i < len(b) {
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], r.next())
		copy(b[i:], tail[:])
	}
}

// fpHost finishes a floating-point-mode weight (fp quantization): random
// codes (E4M3's NaN codes nudged to their neighbour) and per-group scales
// around the one that gives targetStd, uint8 and no biases.
func (s *Source) fpHost(module string, shape []int, spec weights.QuantSpec, data []byte, groups int) *tensor.Host {
	if spec.Bits == 8 {
		for i, b := range data {
			if b&0x7F == 0x7F {
				data[i] = b ^ 1
			}
		}
	}
	// RMS of a uniformly random code's value.
	var ss float64
	n := 1 << spec.Bits
	for c := range n {
		v := float64(quant.FPElement([]byte{byte(c)}, 0, spec.Bits))
		if spec.Bits == 8 && c&0x7F == 0x7F {
			v = 0
		}
		ss += v * v
	}
	base := targetStd(shape[len(shape)-1]) / math.Sqrt(ss/float64(n))
	scales := make([]byte, groups)
	rs := newRNG(s.opts.Seed, module+".scales")
	for g := range scales {
		sc := base * (0.75 + 0.5*rs.float())
		if spec.Mode == quant.NVFP4 {
			scales[g] = quant.EncodeE4M3(float32(sc))
			continue
		}
		scales[g] = uint8(127 + int(math.Round(math.Log2(sc))))
	}
	return &tensor.Host{Name: module + ".weight", Shape: slices.Clone(shape), DType: tensor.U32, Data: data,
		Quant: &tensor.Quant{Bits: spec.Bits, GroupSize: spec.GroupSize, Scales: scales, ScaleDType: tensor.U8, Mode: spec.Mode}}
}
