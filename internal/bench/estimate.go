package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Estimate predicts the memory a run needs before any weight is built, so
// a profile that cannot fit becomes a SKIP:oom_estimate row instead of an
// out-of-memory kill halfway through a ladder.
type Estimate struct {
	StoredBytes int64   // weights as stored (packed words + scales + biases)
	Expansion   float64 // resident bytes per stored byte on this backend (>= 1)
	KVPerToken  int64   // KV bytes per token of context, all layers
	ActBytes    int64   // activations of one prefill chunk plus logits
	Available   int64   // memory the backend may still use; -1 if unknown
	Source      string  // where Available came from
}

// WeightBytes is the predicted resident size of the weights.
func (e Estimate) WeightBytes() int64 { return int64(float64(e.StoredBytes) * e.Expansion) }

// Need is the predicted total for a context of ctx tokens.
func (e Estimate) Need(ctx int) int64 { return e.WeightBytes() + e.KVPerToken*int64(ctx) + e.ActBytes }

// Fits reports whether ctx tokens fit; with unknown memory it says yes.
// A 10% margin covers allocator slack and the runtime.
func (e Estimate) Fits(ctx int) bool {
	return e.Available < 0 || float64(e.Need(ctx))*1.1 <= float64(e.Available)
}

func (e Estimate) String() string {
	av := "unknown"
	if e.Available >= 0 {
		av = fmt.Sprintf("%s (%s)", gib(e.Available), e.Source)
	}
	return fmt.Sprintf("weights %s stored x%.2f resident = %s, KV %s/token, activations %s, available %s",
		gib(e.StoredBytes), e.Expansion, gib(e.WeightBytes()), kib(e.KVPerToken), gib(e.ActBytes), av)
}

func gib(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }
func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10)) }

// estimate builds the Estimate for cfg on be. storedBytes is the planned
// (synthetic) or on-disk (checkpoint) weight size.
func estimate(cfg *weights.Config, be backend.Backend, storedBytes int64, chunk int) Estimate {
	e := Estimate{StoredBytes: storedBytes, KVPerToken: synthetic.KVBytesPerToken(cfg, backend.KVElemBytes(be))}
	e.Expansion = probeExpansion(be, cfg)
	width := 4*cfg.Hidden + 2*max(cfg.Intermediate, cfg.MoEIntermediate*max(cfg.TopK, 1)) + 3*cfg.Heads*max(cfg.HeadDim, cfg.GlobalHeadDim)
	e.ActBytes = int64(chunk)*int64(width)*4 + int64(cfg.Vocab)*4*2
	if m, ok := be.(memoryReport); ok {
		if free, _, err := m.MemoryInfo(); err == nil {
			e.Available, e.Source = free, be.Name()+" free memory"
			return e
		}
	}
	if !backend.IsAccelerator(be) {
		e.Available, e.Source = hostMemory()
		return e
	}
	e.Available, e.Source = -1, ""
	return e
}

// probeExpansion measures how many bytes the backend keeps on the Go heap
// per stored byte by uploading one small quantized weight: a backend that
// dequantizes at load (the CPU backend's interim path keeps f32) holds
// several times the checkpoint size, one that multiplies packed weights
// in place holds about 1x. A device backend's memory is not on the Go
// heap, so the probe reads ~0 there and the factor stays 1.
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
	h := &tensor.Host{Name: "bench.memory_probe", Shape: []int{out, in}, DType: tensor.BF16, Data: make([]byte, out*in*2)}
	if quantized {
		h.DType = tensor.U32
		h.Data = make([]byte, out*in*bits/8)
		h.Quant = &tensor.Quant{Bits: bits, GroupSize: group, ScaleDType: tensor.BF16,
			Scales: make([]byte, 2*out*in/group), Biases: make([]byte, 2*out*in/group)}
	}
	return be.UploadWeight(h)
}

// checkpointBytes is the size of a model folder's safetensors files.
func checkpointBytes(dir string) int64 {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	var n int64
	for _, p := range paths {
		if filepath.Base(p) == "reference.safetensors" {
			continue // test fixtures' reference outputs, not weights
		}
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}
