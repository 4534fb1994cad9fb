package model_test

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// gpt-oss in its three layouts: HF bf16, openai MXFP4 experts, mlx-lm
// (experts mxfp4, the rest affine 8-bit). Each has its own transformers
// reference (on its dequantized weights).
func TestGptOssReferenceCPU(t *testing.T) {
	for _, f := range []string{"tiny/gpt_oss-bf16", "tiny/gpt_oss-mxfp4", "tiny/gpt_oss-mlx-mxfp4-q8g64"} {
		t.Run(f, func(t *testing.T) {
			r := modeltest.Check(t, testdata+f, cpu.New(0), modeltest.Options{RelTol: 1e-3, NearTie: 1e-3, Prefix: 17})
			t.Logf("%s: full %.2e incremental %.2e greedy steps checked %d", f, r.FullRel, r.IncrRel, r.GreedyChecked)
		})
	}
}
