package model_test

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// Qwen3.5 dense and MoE, HF bf16 and mlx-lm 4-bit, against transformers'
// references: the 80-token one and, for the dense fixtures, a 130-token
// prompt whose prefill crosses two chunk boundaries of the delta rule
// (chunks of 64), while the incremental check prefills 17 tokens and then
// runs the one-token recurrence.
func TestQwen35ReferenceCPU(t *testing.T) {
	for _, c := range []struct{ dir, ref string }{
		{"tiny/qwen3_5_text-bf16", ""}, {"tiny/qwen3_5_text-bf16", "reference_t130.safetensors"},
		{"tiny/qwen3_5_text-mlx-q4g64", ""}, {"tiny/qwen3_5_text-mlx-q4g64", "reference_t130.safetensors"},
		{"tiny/qwen3_5_moe_text-bf16", ""}, {"tiny/qwen3_5_moe_text-mlx-q4g64", ""},
	} {
		t.Run(c.dir+"/"+c.ref, func(t *testing.T) {
			r := modeltest.Check(t, testdata+c.dir, cpu.New(0), modeltest.Options{RelTol: 1e-4, NearTie: 1e-3, Prefix: 17, Reference: c.ref})
			t.Logf("%s %s: full %.2e incremental %.2e greedy steps checked %d", c.dir, c.ref, r.FullRel, r.IncrRel, r.GreedyChecked)
		})
	}
}
