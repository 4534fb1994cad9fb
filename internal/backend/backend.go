// Package backend defines the contract between model code and the devices
// that run it. Model code builds a forward pass out of these coarse ops on
// backend-owned tensors; it never touches device memory directly, so a CPU
// and a CUDA implementation are interchangeable.
//
// Conventions:
//   - An activation Tensor is a row-major matrix [Rows, Cols] in the
//     backend's own activation precision (f32 on the CPU, possibly bf16 on
//     a GPU). Row r of a token-major tensor belongs to token r of the Batch.
//   - A Weight is a parameter uploaded once at load time: dense (any float
//     dtype), MLX affine-quantized (packed uint32 + scales + biases) or in
//     one of MLX's floating-point modes (tensor.Quant.Mode: mxfp4, nvfp4,
//     mxfp8; packed codes + uint8 scales, no biases). A backend that cannot
//     run a mode refuses it in UploadWeight.
//     Linear weights have logical shape [out, in]; stacked MoE experts
//     [experts, out, in]; norms and biases [n].
//   - Ops write into dst, which the caller allocated; dst may alias an input
//     only where the op's comment says so.
package backend

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// Tensor is an activation buffer owned by a backend.
type Tensor interface {
	Rows() int
	Cols() int
}

// Weight is a parameter owned by a backend.
type Weight interface {
	Shape() []int
	Quantized() bool
}

// WeightData and QuantData are the host-side parameter description (see
// package tensor); aliases keep backend signatures short.
type (
	WeightData = tensor.Host
	QuantData  = tensor.Quant
)

// Activation selects the gate nonlinearity of a gated MLP: act(gate) * up.
type Activation int

const (
	SiLU     Activation = iota // Llama, Qwen, Mixtral
	GELUTanh                   // Gemma (gelu_pytorch_tanh)
	// SwiGLUClamped is gpt-oss's: gate clamped to <= Limit, up to
	// [-Limit, Limit], then gate*sigmoid(Alpha*gate) * (up+1). Its
	// constants are MoEParams.Alpha and Limit, so only MoE takes it.
	SwiGLUClamped
	// GELU is the exact erf GELU, x*(1+erf(x/sqrt 2))/2: configs saying
	// hidden_act "gelu" (transformers' GELUActivation), not the tanh form.
	GELU
	// Sigmoid is sigmoid(gate) * up (Qwen3.5's attention output gate and
	// shared-expert gate), FeatureSigmoidGate. gate may have a single
	// column while up has more: row r of up is then scaled by
	// sigmoid(gate[r]), and dst, shaped like up, may alias up.
	Sigmoid
)

// RoPE describes rotary embeddings for one attention layer. Inverse
// frequencies are precomputed by the model (they encode scaling variants);
// rotation pairs element i with i+RotaryDim/2 (the "rotate_half" layout),
// and elements at or beyond RotaryDim are left untouched.
type RoPE struct {
	InvFreq   []float32 // RotaryDim/2 inverse frequencies
	RotaryDim int       // <= head dim
	Scale     float32   // attention factor applied to cos/sin (1 for most models)
}

// AttnParams are per-layer attention options.
type AttnParams struct {
	Heads, KVHeads, HeadDim int
	Scale                   float32 // multiplies q·k (1/sqrt(head_dim) usually)
	Window                  int     // sliding window in tokens; 0 means full causal
	Softcap                 float32 // tanh soft-capping of scores; 0 means none
	// Sinks, when set, is a [Heads] weight of per-head logits that join
	// each query's softmax as one more column and are dropped after it
	// (gpt-oss's attention sinks): they only enlarge the denominator.
	Sinks Weight
	// ScratchQK: the caller reads neither q nor k after the call, so a
	// backend that rotates or normalises them inside its attention kernel
	// (RoPE and head norms folded in) need not write them back.
	ScratchQK bool
}

// SeqSlice is one sequence's contiguous run of tokens inside a Batch.
type SeqSlice struct {
	Start, Len int     // rows of the batch that belong to this sequence
	Blocks     []int32 // the sequence's KV block table (block ids in position order)
	// Slot is the sequence's index in [0, KVSpec.Slots), stable while it
	// is admitted and unique among the sequences admitted at once; it
	// selects the sequence's ring of windowed-layer KV (see KVSpec) and
	// its recurrent state (KVLayer.DeltaNet). Only meaningful when the
	// store has rings or recurrent layers.
	Slot int
}

// Batch describes one forward step: the tokens of several sequences, each
// at its own positions, prefill chunks and decode tokens mixed.
//
// On a backend that implements AsyncArgmaxer, a token may be FeedToken(j):
// the id its last queued argmax produced for row j, still on the device.
// A greedy decode step can then be queued before the previous step's id
// has reached the host (Model.ForwardArgmaxAsync).
type Batch struct {
	Tokens    []int32
	Positions []int32    // absolute position of each token in its sequence
	Seqs      []SeqSlice // in row order, covering all tokens
	LogitRows []int      // rows whose logits the caller wants, in output order
}

// FeedToken is the Batch token that stands for row j of the last argmax
// queued by ArgmaxAsync. Real ids are never negative.
func FeedToken(j int) int32 { return int32(-1 - j) }

// NonFiniteRow is Argmax's answer for a row with NaN or +Inf values (-Inf
// is a masked logit and allowed): the engine fails that request instead
// of emitting a token.
const NonFiniteRow = math.MinInt32

// FedRow reports whether id is a FeedToken and the argmax row it names.
func FedRow(id int32) (int, bool) { return int(-1 - id), id < 0 }

// PendingIDs is an argmax whose ids are still on their way to the host.
type PendingIDs interface {
	// Wait blocks until the ids are on the host. It reports the first
	// failure of the queued work, as Sync would.
	Wait() ([]int32, error)
}

// AsyncArgmaxer is a backend that queues an argmax without waiting for
// it and resolves FeedTokens on the device. With it, the host prepares and
// launches step N+1 while the device still runs step N (vLLM calls this
// asynchronous scheduling), so the host's per-step work stops adding to
// the device's idle time.
type AsyncArgmaxer interface {
	// ArgmaxAsync queues Argmax of t's rows; the ids become the rows that
	// FeedTokens of the next steps name.
	ArgmaxAsync(t Tensor) PendingIDs
}

// CopyMeter is a backend that measures its memory's copy rate: the
// ceiling a memory-bound decode is compared with (bench decode).
type CopyMeter interface {
	// CopyGBps copies n bytes between two fresh buffers and returns the
	// best rate in GB/s, counting bytes read plus bytes written.
	CopyGBps(n int64) (float64, error)
}

// ReadyIDs is a PendingIDs that is already done (backends without
// AsyncArgmaxer).
type ReadyIDs struct {
	IDs []int32
	Err error
}

func (r ReadyIDs) Wait() ([]int32, error) { return r.IDs, r.Err }

// KVSpec sizes the paged KV store: NumBlocks blocks of BlockSize tokens,
// each layer with its own KV head count and head dim.
//
// Sliding-window layers need only the last Window positions of each
// sequence, so a backend may keep them in a ring per sequence slot instead
// of the paged blocks: Slots rings of RingTokens positions, position p at
// ring index p % RingTokens, making their memory independent of the
// context length. The caller guarantees that a step's chunk of Len tokens
// for one sequence satisfies Window-1+Len <= RingTokens, so a chunk's keys
// can all be written before any of its queries reads (the oldest key a
// query needs is never overwritten by a later key of the same chunk).
// Slots or RingTokens 0 means no rings: windowed layers stay paged, which
// is also what a backend that ignores these fields does. The block tables
// still cover every position, as full layers need them.
type KVSpec struct {
	NumBlocks, BlockSize int
	Layers               []KVLayer
	Slots                int // sequences admitted at once (SeqSlice.Slot < Slots)
	RingTokens           int // ring length per slot for windowed layers
	// Snapshots is how many copies of one slot's per-slot state (rings
	// and recurrent state) the store keeps for SlotSnapshotter; 0 on a
	// backend that is not one.
	Snapshots int
	// Dtype is how K and V are kept ("" or KVAuto: the backend's own).
	Dtype KVDtype
}

// KVLayer is one layer's KV geometry.
type KVLayer struct {
	KVHeads, HeadDim int
	// Window is the layer's sliding window in tokens (AttnParams.Window);
	// 0 means full attention, which always uses the paged blocks.
	Window int
	// Shared: the layer has no K/V of its own; it attends over an earlier
	// layer's (Gemma 4's KV-shared layers call Attention with nil k and v
	// and that layer's index, FeatureSharedKV), so the store keeps none.
	Shared bool
	// DeltaNet, when its VHeads is set, makes the layer Gated DeltaNet
	// linear attention (FeatureGatedDeltaNet, deltanet.go): no K/V; the
	// store keeps per slot the layer's recurrent state instead, whose size
	// does not depend on the context. KVSpec.Slots must then be positive.
	DeltaNet DeltaNetParams
}

// Recurrent reports whether the layer keeps per-slot recurrent state
// instead of K/V.
func (l KVLayer) Recurrent() bool { return l.DeltaNet.VHeads > 0 }

// KVElemSizer is implemented by a backend whose KV cache elements are not
// float32 (the CUDA backend keeps f16); KVElemBytes is the size of one K
// or V element.
type KVElemSizer interface{ KVElemBytes() int }

// KVElemBytes is be's KV element size in bytes: 4 (float32) unless the
// backend says otherwise. Memory budgets for the cache use it.
func KVElemBytes(be Backend) int {
	if s, ok := be.(KVElemSizer); ok {
		return s.KVElemBytes()
	}
	return 4
}

// KVStore is backend memory for paged K and V of every layer.
type KVStore interface {
	Spec() KVSpec
}

// Experts are the stacked weights of a MoE block, each [experts, out, in].
// The biases are optional (gpt-oss): GateBias and UpBias [experts, inter],
// DownBias [experts, hidden] added to each expert's projections, and
// RouterBias [experts] to the router logits. Scale (optional, Gemma 4's
// per_expert_scale, FeatureMoERouted) [experts] multiplies each selected
// expert's routing weight after the renormalisation.
//
// Lo is the first expert the stacked weights (and their biases) hold:
// under expert parallelism a rank holds experts [Lo, Lo+held) and routes
// over all of them (the router, RouterBias and Scale are whole); a token's
// chosen experts outside the range add nothing, so the ranks' outputs sum
// to the whole block's (docs/tensor-parallel.md). Backends without
// FeatureExpertShard need every expert (Lo 0).
type Experts struct {
	Gate, Up, Down                         Weight
	GateBias, UpBias, DownBias, RouterBias Weight
	Scale                                  Weight
	Lo                                     int
}

// MoEParams select the routing rule.
type MoEParams struct {
	TopK   int
	Renorm bool // renormalise the top-k probabilities to sum to 1
	Act    Activation
	// Alpha and Limit are SwiGLUClamped's constants (gpt-oss: 1.702 and
	// config.swiglu_limit).
	Alpha, Limit float32
}

// Backend is a device that runs the ops of a forward pass.
type Backend interface {
	Name() string

	UploadWeight(w *WeightData) (Weight, error)
	// NewTensor allocates a zeroed activation matrix.
	NewTensor(rows, cols int) Tensor
	// View reinterprets t's first rows*cols elements with a new shape,
	// sharing memory. rows*cols must not exceed t.Rows()*t.Cols().
	View(t Tensor, rows, cols int) Tensor
	// Slice returns rows [from, to) of t, sharing memory.
	Slice(t Tensor, from, to int) Tensor
	NewKVStore(spec KVSpec) (KVStore, error)

	// BeginStep makes b the current batch: the ops below that need token
	// ids, positions, block tables or logit rows read them from it. A GPU
	// backend uploads the batch description here once per step, which is
	// also what lets it replay a captured graph of the step's ops.
	BeginStep(b *Batch) error

	// Embed writes table[tokens[r]] (dequantized) to dst row r.
	Embed(dst Tensor, table Weight)
	// Linear computes dst = x @ w^T (+ bias when bias != nil).
	Linear(dst, x Tensor, w, bias Weight)
	// RMSNorm normalises each row of x: dst = x/rms(x) * w (w nil: no
	// weight). dst may alias x.
	RMSNorm(dst, x Tensor, w Weight, eps float32)
	// ApplyRoPE rotates x [tokens, heads*headDim] in place at the step's
	// positions.
	ApplyRoPE(x Tensor, heads, headDim int, r RoPE)
	// Attention stores k, v ([tokens, KVHeads*HeadDim]) into kv for layer at
	// the step's positions, then writes causal (optionally windowed)
	// attention of q ([tokens, Heads*HeadDim]) over each sequence's cache
	// into dst ([tokens, Heads*HeadDim]). With FeatureSharedKV, nil k and v
	// store nothing: q attends over what layer holds (written earlier in
	// the same step by that layer's own call).
	Attention(dst, q, k, v Tensor, kv KVStore, layer int, p AttnParams)
	// GatedAct computes dst = act(gate) * up elementwise. dst may alias gate.
	GatedAct(dst, gate, up Tensor, act Activation)
	// Add computes dst = a + b. dst may alias a or b.
	Add(dst, a, b Tensor)
	// Scale multiplies x in place by s.
	Scale(x Tensor, s float32)
	// Softcap computes x = cap*tanh(x/cap) in place.
	Softcap(x Tensor, cap float32)
	// GatherLogitRows copies the step's LogitRows of src to dst in order.
	GatherLogitRows(dst, src Tensor)
	// MoE computes a routed mixture of gated-MLP experts of x into dst:
	// router logits x @ router^T, softmax, top-k, optional renorm; only the
	// selected experts run.
	MoE(dst, x Tensor, router Weight, e Experts, p MoEParams)
	// ReadRows copies t to host memory (row-major, len Rows*Cols).
	ReadRows(t Tensor, out []float32)
	// Argmax returns the index of the largest element of each row of t,
	// or NonFiniteRow for a row holding NaN or +Inf.
	Argmax(t Tensor) []int32
	// Sync waits for queued work (no-op on synchronous backends).
	Sync() error
	// Close releases device memory.
	Close() error
}

// Factory creates a backend. Options are backend-specific (threads, device).
type Factory func(opts Options) (Backend, error)

// Options configure backend creation.
type Options struct {
	Threads int // CPU worker goroutines; 0 = all cores
	Device  int // GPU ordinal
}

var (
	mu       sync.Mutex
	registry = map[string]Factory{}
)

// Register makes a backend available by name; backends call it from init.
// A name registered twice is a wiring bug, so it panics rather than let the
// second silently replace the first.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic("backend: " + name + " registered twice")
	}
	registry[name] = f
}

// Names lists registered backends.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// New creates the named backend. "auto" picks cuda when it can start, else cpu.
func New(name string, opts Options) (Backend, error) {
	mu.Lock()
	f, ok := registry[name]
	cuda, hasCUDA := registry["cuda"]
	cpu := registry["cpu"]
	mu.Unlock()
	if name == "auto" {
		if hasCUDA {
			if b, err := cuda(opts); err == nil {
				return b, nil
			}
		}
		if cpu == nil {
			return nil, fmt.Errorf("backend auto: no cpu backend registered")
		}
		return cpu(opts)
	}
	if !ok {
		return nil, fmt.Errorf("unknown backend %q (have %v)", name, Names())
	}
	return f(opts)
}

// Accelerator is implemented by backends whose ops run on a separate
// device: they amortise each weight read over long prefill chunks, their
// first run pays one-time costs (kernel loading, graph capture) that a
// benchmark warms up, and their memory is the device's. DeviceName names
// the device ("NVIDIA H200").
type Accelerator interface {
	DeviceName() string
}

// Feature names an op or option beyond what every backend runs. A model
// family that needs one asks Supports at load and refuses a backend
// without it, rather than let that backend ignore a field it does not
// know (a missing softmax column or bias gives plausible wrong logits).
type Feature string

const (
	FeatureAttentionSinks Feature = "attention sinks (AttnParams.Sinks)"
	FeatureMoEBiases      Feature = "MoE router and expert biases (Experts.*Bias)"
	FeatureSwiGLUClamped  Feature = "the clamped SwiGLU activation (SwiGLUClamped)"
	FeatureFPQuant        Feature = "MLX floating-point quantization (mxfp4, nvfp4, mxfp8 weights)"
	FeatureMoERouted      Feature = "MoE routed on its own input with per-expert scales (RoutedMoE, Experts.Scale)"
	FeatureSharedKV       Feature = "attention over another layer's KV (nil k and v, KVLayer.Shared)"
	FeatureExpertShard    Feature = "MoE over a range of the router's experts (Experts.Lo, expert parallelism)"
	// FeatureRings: the KV store keeps windowed layers in per-slot rings
	// when KVSpec.RingTokens asks; a backend without it pages them.
	FeatureRings Feature = "sliding-window layers in per-slot rings (KVSpec.RingTokens)"
)

// RoutedMoE is a backend whose MoE can route on another input than the
// experts see (FeatureMoERouted): Gemma 4 routes on a differently
// normalised copy of the residual. MoE(dst, x, ...) equals
// MoERouted(dst, x, x, ...).
type RoutedMoE interface {
	MoERouted(dst, x, routerX Tensor, router Weight, e Experts, p MoEParams)
}

// Featurer is a backend that runs some Features.
type Featurer interface {
	Supports(f Feature) bool
}

// Supports reports whether b runs f.
func Supports(b Backend, f Feature) bool {
	s, ok := b.(Featurer)
	return ok && s.Supports(f)
}

// Upload is b.UploadWeight, first refusing by name a weight in a
// floating-point quantization mode on a backend without FeatureFPQuant
// (whose own check would only see sizes it does not expect).
func Upload(b Backend, h *WeightData) (Weight, error) {
	if q := h.Quant; q != nil && q.Mode != "" && q.Mode != "affine" && !Supports(b, FeatureFPQuant) {
		return nil, fmt.Errorf("%s: %s weights need %s, which the %s backend does not run", h.Name, q.Mode, FeatureFPQuant, b.Name())
	}
	return b.UploadWeight(h)
}

// IsAccelerator reports whether b runs its ops on a separate device.
func IsAccelerator(b Backend) bool {
	_, ok := b.(Accelerator)
	return ok
}

// HostTime is where a device backend's host time between two steps went
// while the device had nothing queued (the CUDA backend's DeviceIdle):
// Before, from the last result copied back to the next BeginStep (the
// caller's own work); Inputs, BeginStep (the step's inputs uploaded);
// Record, the model's ops recorded; Launch, the recorded launches matched
// to a graph and launched. Total is their sum over Gaps idle periods.
type HostTime struct {
	Total, Before, Inputs, Record, Launch time.Duration
	Gaps                                  int
}

// Add adds o's times and gaps to h.
func (h *HostTime) Add(o HostTime) {
	h.Total, h.Before, h.Inputs = h.Total+o.Total, h.Before+o.Before, h.Inputs+o.Inputs
	h.Record, h.Launch, h.Gaps = h.Record+o.Record, h.Launch+o.Launch, h.Gaps+o.Gaps
}
