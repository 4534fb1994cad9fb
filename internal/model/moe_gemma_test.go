package model_test

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// The fixtures of issue 7: routed experts (HF per-expert and MLX stacked
// naming) and Gemma 4's hybrid sliding/full attention. T=40 exceeds the
// Gemma window of 8, so the window is exercised in all three checks.
var moeGemmaFixtures = []string{
	"tiny/qwen3_moe-bf16", "tiny/qwen3_moe-mlx-q4g64",
	"tiny/mixtral-bf16", "tiny/mixtral-mlx-q4g64",
	"tiny/gemma4-bf16", "tiny/gemma4-mlx-q4g64",
}

func TestReferenceLogitsMoEGemmaCPU(t *testing.T) {
	for _, f := range moeGemmaFixtures {
		t.Run(f, func(t *testing.T) {
			r := modeltest.Check(t, testdata+f, cpu.New(0), modeltest.Options{RelTol: 1e-3, NearTie: 1e-3, Prefix: 17})
			t.Logf("%s: full %.2e incremental %.2e greedy steps checked %d", f, r.FullRel, r.IncrRel, r.GreedyChecked)
		})
	}
}
