//go:build linux

package cuda_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
	"github.com/mlxcel/mlxcel/internal/bench"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// TestBenchBatchDecodeTuning times `bench decode --batch` steps of the
// synthetic Llama-3.1-8B 4-bit model under tunings of the decode step
// (s12r5 measured the attention splits and waves and the qmm4 row range;
// s13 the tile kernel of batched decode attention against attn_decode,
// the qmm4 forms, qmm4 from 17 rows; s15 the warpgroup forms against qmm4),
// interleaved in one process, to measure defaults rather than assume
// them. MLXCEL_CUDA_BENCH=1 runs it on a GPU.
func TestBenchBatchDecodeTuning(t *testing.T) {
	be, b := benchBackend(t)
	defer be.Close()
	m := syntheticModel(t, be, "llama-3.1-8b-4bit")
	def := b.Tuning
	variants := map[string]func(*plan.Tuning){
		"default": func(*plan.Tuning) {},
		"notile":  func(u *plan.Tuning) { u.DecTileMinTokens = 0 }, // attn_decode at every batch
		"wide":    func(u *plan.Tuning) { u.QMMVariant = "wide" },  // qmm4's 8-warp form for every product
		"m2d1":    func(u *plan.Tuning) { u.QMMVariant = "m2d1" },
		"qmm17":   func(u *plan.Tuning) { u.QMMMinRows = 17 },      // 17-32 rows on qmm4 (bf16 x) instead of qmma4 (f16 x)
		"noqmmw":  func(u *plan.Tuning) { u.QMMWarpgroup = false }, // qmm4 (mma.sync) instead of the warpgroup forms
		"w128":    func(u *plan.Tuning) { u.QMMVariant = "w128" },  // the 128-row warpgroup tile at every row count
	}
	// Each call allocates its own KV store and frees it after its point
	// (backend.FreeKVStore).
	fmt.Println("tuning,batch,context,step_ms,tok_s")
	for _, pt := range []struct {
		n, ctx int
		vs     []string
	}{{1, 1024, []string{"default", "notile"}}, {8, 1024, []string{"default"}},
		{16, 1024, []string{"default"}}, {24, 1024, []string{"default", "qmm17"}},
		{32, 1024, []string{"default", "qmm17"}}, {64, 1024, []string{"default", "w128"}},
		{96, 1024, []string{"default", "noqmmw"}}, {128, 1024, []string{"default", "noqmmw"}}} {
		for _, name := range pt.vs {
			b.Tuning = def
			variants[name](&b.Tuning)
			ms, err := bench.BatchStepMS(m, pt.n, pt.ctx, 16, 8192)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%s,%d,%d,%.3f,%.1f\n", name, pt.n, pt.ctx, ms, float64(pt.n)/ms*1e3)
		}
	}
	b.Tuning = def
}

// benchBackend is the CUDA backend for a benchmark (MLXCEL_CUDA_BENCH=1;
// skipped without it or without a device).
func benchBackend(t *testing.T) (backend.Backend, *cuda.Backend) {
	t.Helper()
	if os.Getenv("MLXCEL_CUDA_BENCH") != "1" {
		t.Skip("MLXCEL_CUDA_BENCH=1 runs the benchmarks")
	}
	be, err := backend.New("cuda", backend.Options{})
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	return be, be.(*cuda.Backend)
}

// syntheticModel builds a profile's synthetic model on be.
func syntheticModel(t *testing.T, be backend.Backend, profile string) *model.Model {
	t.Helper()
	dir, err := synthetic.FindProfile(profile, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := weights.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := synthetic.Build(cfg, be, synthetic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBenchBatchDecodeTuningMoE times decode steps of the synthetic
// Qwen3-30B-A3B 4-bit (128 experts, top 8) and gpt-oss-20b (32 experts,
// top 4, mxfp4) models at 8 to 64 sequences: below 32 tokens the default
// (plan.MoEGEMMFrom's rule) interleaved with every step on the grouped
// expert GEMM ("grouped", which reads each expert once for all its
// tokens) and every step on the three-launch per-token path ("pertoken");
// from 32, gpt-oss's decode attention (with its sinks) on attn_dtile, the
// default, against attn_decode ("notile").
// MLXCEL_CUDA_BENCH=1 runs it on a GPU.
func TestBenchBatchDecodeTuningMoE(t *testing.T) {
	be, b := benchBackend(t)
	defer be.Close()
	def := b.Tuning
	fmt.Println("tuning,batch,context,step_ms,tok_s")
	for _, p := range []string{"qwen3-30b-a3b-4bit", "gpt-oss-20b-mxfp4-q8"} {
		m := syntheticModel(t, be, p)
		for _, n := range []int{8, 16, 24, 32, 64} {
			vs := []string{"default"}
			switch {
			case n < plan.MoEDecodeMaxTokens:
				vs = []string{"default", "grouped", "pertoken", "default", "grouped", "pertoken"}
			case strings.HasPrefix(p, "gpt-oss"): // attention sinks on the tile kernel or not
				vs = []string{"default", "notile", "default", "notile"}
			}
			for _, v := range vs {
				b.Tuning = def
				switch v {
				case "grouped":
					b.Tuning.MoEGEMMRows = 1
				case "pertoken":
					b.Tuning.MoEGEMMRows = plan.MoEDecodeMaxTokens
				case "notile":
					b.Tuning.DecTileMinTokens = 0
				}
				ms, err := bench.BatchStepMS(m, n, 1024, 16, 8192)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("%s_%s,%d,%d,%.3f,%.1f\n", p, v, n, 1024, ms, float64(n)/ms*1e3)
			}
		}
		b.Tuning = def
	}
}
