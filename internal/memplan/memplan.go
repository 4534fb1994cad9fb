// Package memplan predicts the memory a model needs (weights, KV cache,
// activations) before anything big is allocated, and checks it against
// what the backend has free, so a model that cannot fit stops with the
// numbers and what to change instead of failing half way through a load.
// The benchmarks, the loader's preflight and `mlxcel inspect` share it.
package memplan

import (
	"fmt"
	"os"
	"runtime"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Estimate is the predicted footprint of a model on one backend.
type Estimate struct {
	StoredBytes int64   // weights as stored (packed words + scales + biases)
	Expansion   float64 // resident bytes per stored byte on this backend (>= 1)
	KVPerToken  int64   // paged KV bytes per token of context (the layers that keep K/V per block)
	// KVPerSeq is what each sequence slot costs whatever its length: the
	// recurrent state of hybrid models' linear-attention layers.
	KVPerSeq  int64
	ActBytes  int64  // activations of one prefill chunk plus logits
	Available int64  // memory the backend may still use; -1 if unknown
	Source    string // where Available came from

	// The store as the engine sizes it on be (sliding-window rings
	// included); without them (an Estimate built by hand) KVBytes is
	// KVPerToken and KVPerSeq alone.
	be     backend.Backend
	layers []backend.KVLayer
	chunk  int
	dtype  backend.KVDtype // --kv-cache-dtype ("": the backend's own)
	// snapshots: KVPerSeq includes a snapshot place per slot.
	snapshots bool
}

// WeightBytes is the predicted resident size of the weights.
func (e Estimate) WeightBytes() int64 { return int64(float64(e.StoredBytes) * e.Expansion) }

// KVBytes is the KV store of tokens positions for seqs sequence slots, as
// the backend allocates it.
func (e Estimate) KVBytes(tokens, seqs int) int64 {
	seqs = max(seqs, 1)
	if e.layers == nil {
		return e.KVPerToken*int64(tokens) + e.KVPerSeq*int64(seqs)
	}
	// One-token blocks: the same store as any block size dividing tokens.
	cfg := engine.Config{NumBlocks: max(tokens, 1), BlockSize: 1, Parallel: seqs, PrefillChunk: e.chunk, KVDtype: e.dtype}
	return backend.KVStoreBytes(e.be, engine.KVSpec(e.be, cfg, e.layers))
}

// KVTokensWithin is how many tokens of KV cache, in blocks of blockSize,
// budget bytes hold for seqs slots.
func (e Estimate) KVTokensWithin(budget int64, seqs, blockSize int) int {
	seqs = max(seqs, 1)
	if e.layers == nil {
		if e.KVPerToken <= 0 {
			return 0
		}
		return int(max(0, budget-e.KVPerSeq*int64(seqs))/(e.KVPerToken*int64(blockSize))) * blockSize
	}
	cfg := engine.Config{BlockSize: blockSize, Parallel: seqs, PrefillChunk: e.chunk, KVDtype: e.dtype}
	return engine.KVBlocksWithin(e.be, cfg, e.layers, budget) * blockSize
}

// Need is the predicted total for a KV cache of tokens positions over seqs
// slots.
func (e Estimate) Need(tokens, seqs int) int64 {
	return e.WeightBytes() + e.KVBytes(tokens, seqs) + e.ActBytes
}

// Margin covers allocator slack, the runtime and the CUDA context.
const Margin = 1.1

// Fits reports whether tokens over seqs slots fit; with unknown memory it
// says yes.
func (e Estimate) Fits(tokens, seqs int) bool {
	return e.Available < 0 || float64(e.Need(tokens, seqs))*Margin <= float64(e.Available)
}

// MaxTokens is how many KV tokens fit beside the weights for seqs slots
// (0: none; -1: unknown).
func (e Estimate) MaxTokens(seqs int) int {
	if e.Available < 0 || e.KVPerToken <= 0 {
		return -1
	}
	room := int64(float64(e.Available)/Margin) - e.WeightBytes() - e.ActBytes
	return e.KVTokensWithin(room, seqs, 1)
}

func (e Estimate) String() string {
	av := "unknown"
	if e.Available >= 0 {
		av = fmt.Sprintf("%s (%s)", GiB(e.Available), e.Source)
	}
	state := ""
	if e.KVPerSeq > 0 {
		state = fmt.Sprintf(" + %s/sequence of recurrent state", MiB(e.KVPerSeq))
		if e.snapshots {
			state += " (half of it the slot's prefix-cache snapshot)"
		}
	}
	return fmt.Sprintf("weights %s stored x%.2f resident = %s, KV %s/token%s, activations %s, available %s",
		GiB(e.StoredBytes), e.Expansion, GiB(e.WeightBytes()), KiB(e.KVPerToken), state, GiB(e.ActBytes), av)
}

// GiB, MiB and KiB format byte counts as the estimates print them.
func GiB(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }
func KiB(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10)) }
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// New builds the Estimate for cfg on be. storedBytes is the planned
// (synthetic) or on-disk (checkpoint) weight size; chunk the prefill
// chunk in tokens.
func New(cfg *weights.Config, be backend.Backend, storedBytes int64, chunk int) Estimate {
	e := Estimate{StoredBytes: storedBytes, be: be, layers: kvLayers(cfg), chunk: chunk}
	e.kvCost()
	e.Expansion = probeExpansion(be, cfg)
	e.ActBytes = actBytes(cfg, be, chunk)
	e.Available, e.Source = Available(be)
	return e
}

// moeTileRows is the row tile of the CUDA grouped MoE GEMM: each expert's
// rows in a step are padded to a multiple of it.
const moeTileRows = 32

// actBytes is what a prefill step of chunk tokens holds beside the weights
// and the KV cache: the layer's f32 activations; the grouped MoE's scratch
// (a gathered row and the expert outputs for every (token, expert) pair,
// one layer's at a time); on an accelerator the largest weight
// dequantized to bf16 and x's bf16 copy for the many-row GEMMs (the LM
// head takes that path once a step has more logit rows than the quantized
// kernels take); and the logits.
func actBytes(cfg *weights.Config, be backend.Backend, chunk int) int64 {
	T, hidden, inter := int64(chunk), int64(cfg.Hidden), int64(cfg.Intermediate)
	attn := int64(3 * cfg.Heads * max(cfg.HeadDim, cfg.GlobalHeadDim))
	act := T*(4*hidden+2*inter+attn)*4 + int64(cfg.Vocab)*4*2
	if cfg.NumExperts > 0 {
		E, k, mi := int64(cfg.NumExperts), int64(max(cfg.TopK, 1)), int64(cfg.MoEIntermediate)
		rows := T*k + E*(moeTileRows-1)
		// + the sorted order, router logits, ids, weights, inverse order,
		// tile table and alignment.
		act += rows*(hidden+2*mi+1)*4 + T*E*4 + T*k*3*4 + 1<<16
	}
	if backend.IsAccelerator(be) {
		act += max(int64(cfg.Vocab), inter, int64(cfg.Heads*max(cfg.HeadDim, cfg.GlobalHeadDim)))*hidden*2 + T*max(hidden, inter)*2
	}
	return act
}

// WithKVDtype is e with the KV cache kept at d (--kv-cache-dtype).
func (e Estimate) WithKVDtype(d backend.KVDtype) Estimate {
	e.dtype = d
	e.kvCost()
	return e
}

// kvCost sets KVPerToken and KVPerSeq: per token and per slot with every
// layer paged (rings, which the engine picks by the cache's size, only
// make KVBytes smaller), at e's dtype.
func (e *Estimate) kvCost() {
	// A slot's snapshot place for prefix caching counts with the slot.
	spec := engine.WithSnapshots(backend.KVSpec{BlockSize: 1, Slots: 1, Layers: e.layers, Dtype: e.dtype}, engine.Config{}, e.be)
	c := backend.KVCostOf(e.be, spec)
	e.snapshots = spec.Snapshots > 0
	e.KVPerToken, e.KVPerSeq = c.PerBlock, c.Fixed
}

// kvLayers is cfg's KV geometry; an architecture the build does not know
// (its load fails later, naming it) is counted as plain attention layers.
func kvLayers(cfg *weights.Config) []backend.KVLayer {
	if l, err := model.KVLayersFor(cfg); err == nil {
		return l
	}
	l := make([]backend.KVLayer, cfg.Layers)
	for i := range l {
		l[i] = backend.KVLayer{KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim}
	}
	return l
}

// Available is the memory be may still use and where the figure comes
// from: the device's free memory when the backend reports it, the host's
// on a backend that runs on the host, else -1.
func Available(be backend.Backend) (int64, string) {
	if m, ok := be.(backend.MemoryReporter); ok {
		if free, _, err := m.MemoryInfo(); err == nil {
			return free, be.Name() + " free memory"
		}
	}
	if !backend.IsAccelerator(be) {
		return HostMemory()
	}
	return -1, ""
}

// probeExpansion measures how many bytes the backend keeps on the Go heap
// per stored byte by uploading one small quantized weight: a backend that
// dequantizes at load holds several times the checkpoint size, one that
// multiplies packed weights in place holds about 1x. A device backend's
// memory is not on the Go heap, so the probe reads ~0 there and the
// factor stays 1.
func probeExpansion(be backend.Backend, cfg *weights.Config) float64 {
	bits, group := 4, 64
	if cfg.Quant.Default != nil {
		bits, group = cfg.Quant.Default.Bits, cfg.Quant.Default.GroupSize
	}
	const out, in = 512, 2048
	stored := int64(out*in*bits/8 + 2*2*out*in/group)
	if cfg.Quant.Default == nil {
		stored = int64(out * in * 2) // bf16 dense
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w, err := uploadProbe(be, out, in, bits, group, cfg.Quant.Default != nil)
	if err != nil {
		return 1
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(w)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	return max(1, float64(grown)/float64(stored))
}

// uploadProbe builds the probe on the host and uploads it; the host copy
// is garbage once this returns, so only what the backend kept is counted.
func uploadProbe(be backend.Backend, out, in, bits, group int, quantized bool) (backend.Weight, error) {
	h := &tensor.Host{Name: "memplan.probe", Shape: []int{out, in}, DType: tensor.BF16, Data: make([]byte, out*in*2)}
	if quantized {
		h.DType = tensor.U32
		h.Data = make([]byte, out*in*bits/8)
		h.Quant = &tensor.Quant{Bits: bits, GroupSize: group, ScaleDType: tensor.BF16,
			Scales: make([]byte, 2*out*in/group), Biases: make([]byte, 2*out*in/group)}
	}
	return be.UploadWeight(h)
}

// CheckpointBytes is the size of a model folder's safetensors files.
func CheckpointBytes(dir string) int64 {
	paths, _ := weights.WeightFiles(dir) // not a consolidated.safetensors or a fixture's references
	var n int64
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}
