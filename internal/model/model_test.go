package model_test

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

const testdata = "../../../shared/testdata/"

// The fixtures of the Llama family (issue "Model core").
var denseFixtures = []string{
	"tiny/llama-bf16", "tiny/qwen2-bf16", "tiny/qwen3-bf16",
	"tiny/llama-mlx-q4g64", "tiny/qwen2-mlx-q4g64", "tiny/qwen3-mlx-q4g64",
	"models/stories260k",
	"tiny/qwen2_yarn-bf16", // yarn RoPE scaling, 200 tokens over an original 64
}

func TestReferenceLogitsCPU(t *testing.T) {
	for _, f := range denseFixtures {
		t.Run(f, func(t *testing.T) {
			r := modeltest.Check(t, testdata+f, cpu.New(0), modeltest.Options{RelTol: 1e-3, NearTie: 1e-3, Prefix: 17})
			t.Logf("%s: full %.2e incremental %.2e greedy steps checked %d", f, r.FullRel, r.IncrRel, r.GreedyChecked)
		})
	}
}
