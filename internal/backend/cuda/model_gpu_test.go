//go:build linux

package cuda

import (
	"os"
	"testing"

	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// TestModelsGPU runs the tiny reference fixtures through the model code on
// the GPU: full-sequence logits, the same through the KV cache, and greedy
// ids (outside near-ties) must match the HF reference. MLXCEL_TESTDATA
// points at shared/testdata (scripts/gpu-check.sh carries a copy).
func TestModelsGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	dir := testdataDir()
	for _, f := range []string{"tiny/llama-bf16", "tiny/qwen2-bf16", "tiny/qwen3-bf16", "tiny/llama-mlx-q4g64",
		"tiny/qwen2-mlx-q4g64", "tiny/qwen3-mlx-q4g64", "models/stories260k",
		// MoE (routing and experts on the device) and Gemma 4 (per-layer
		// head dims, k_eq_v, soft-capping, sliding window).
		"tiny/qwen3_moe-bf16", "tiny/qwen3_moe-mlx-q4g64", "tiny/mixtral-bf16", "tiny/mixtral-mlx-q4g64",
		"tiny/gemma4-bf16", "tiny/gemma4-mlx-q4g64",
		// gpt-oss (attention sinks, biased MoE, clamped SwiGLU; its MXFP4
		// fixtures need FP quant), Gemma 4's E series (KV-shared layers,
		// per-layer inputs) and MoE (routed on its own input, expert
		// scales), Gemma 3.
		"tiny/gpt_oss-bf16", "tiny/gpt_oss-mxfp4", "tiny/gpt_oss-mlx-mxfp4-q8g64", "tiny/gemma4_e-bf16", "tiny/gemma4_e-mlx-q4g64", "tiny/gemma4_moe-bf16",
		"tiny/gemma4_moe-mlx-q4g64", "tiny/gemma3_text-bf16", "tiny/gemma3_text-mlx-q4g64"} {
		t.Run(f, func(t *testing.T) {
			if _, err := os.Stat(dir + "/" + f); err != nil {
				t.Fatalf("fixture %s missing (MLXCEL_TESTDATA or ../shared/testdata): %v", f, err)
			}
			r := modeltest.Check(t, dir+"/"+f, b, modeltest.Options{RelTol: 2e-2, NearTie: 1e-3, Prefix: 17})
			t.Logf("%s: full %.2e incremental %.2e greedy steps checked %d, pipelined %d", f, r.FullRel, r.IncrRel, r.GreedyChecked, r.Pipelined)
		})
	}
	for _, f := range hybridFixtures { // (model_hybrid_gpu_test.go)
		t.Run(f.dir+"/"+f.ref, func(t *testing.T) {
			if _, err := os.Stat(dir + "/" + f.dir); err != nil {
				t.Fatalf("fixture %s missing (MLXCEL_TESTDATA or ../shared/testdata): %v", f.dir, err)
			}
			r := modeltest.Check(t, dir+"/"+f.dir, b, modeltest.Options{RelTol: 2e-2, NearTie: 1e-3, Prefix: 17, Reference: f.ref,
				FullRelTol: f.fullTol, GreedyChunk: 32})
			t.Logf("%s %s: full %.2e incremental %.2e greedy steps checked %d, pipelined %d", f.dir, f.ref, r.FullRel, r.IncrRel, r.GreedyChecked, r.Pipelined)
		})
	}
	c, r, d, fl, lastErr := b.GraphStats()
	t.Logf("graphs: %d captured, %d replays, %d direct launches, %d failed (%v)", c, r, d, fl, lastErr)
}

// TestDumpSource writes the concatenated kernel source to MLXCEL_DUMP_SRC
// (for nvcc -Xptxas -v resource reports on the GPU machine).
func TestDumpSource(t *testing.T) {
	p := os.Getenv("MLXCEL_DUMP_SRC")
	if p == "" {
		t.Skip("MLXCEL_DUMP_SRC not set")
	}
	if err := os.WriteFile(p, []byte(kernelSource()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testdataDir is shared/testdata: MLXCEL_TESTDATA (scripts/gpu-check.sh
// carries a copy to the GPU machine), else beside the checkout.
func testdataDir() string {
	if dir := os.Getenv("MLXCEL_TESTDATA"); dir != "" {
		return dir
	}
	return "../../../../shared/testdata"
}
