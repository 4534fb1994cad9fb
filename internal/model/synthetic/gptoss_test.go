package synthetic_test

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// gpt-oss as mlx-lm stores it (experts in mxfp4, the rest affine 8-bit):
// the plan matches the fixture name for name, and a model builds and runs
// on the synthetic weights, also with the experts in nvfp4 and mxfp8.
func TestGptOssPlan(t *testing.T) {
	needTestdata(t)
	dir := testdata + "tiny/gpt_oss-mlx-mxfp4-q8g64"
	checkPlan(t, dir)
	// A decode token reads top-k of the experts (2 of 4 here).
	cfg, err := weights.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := synthetic.Plan(cfg)
	var experts, embed int64
	for _, p := range plan {
		switch {
		case strings.Contains(p.Name, ".mlp.experts."):
			experts += p.Bytes()
		case strings.HasPrefix(p.Name, "model.embed_tokens."):
			embed += p.Bytes()
		}
	}
	want := synthetic.TotalBytes(plan) - experts/2 - embed + embed/int64(cfg.Vocab)
	if got := synthetic.DecodeBytes(plan, cfg); experts == 0 || got != want {
		t.Errorf("decode bytes %d, want %d (experts %d)", got, want, experts)
	}
	for _, mode := range []string{quant.MXFP4, quant.NVFP4, quant.MXFP8} {
		t.Run(mode, func(t *testing.T) {
			cfg, err := weights.LoadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			bits, group, _ := quant.FPParams(mode)
			cfg.Quant.Default = &weights.QuantSpec{Bits: bits, GroupSize: group, Mode: mode}
			checkBuildForward(t, cfg)
			plan, _ := synthetic.Plan(cfg)
			for _, p := range plan {
				if p.Name == "model.layers.0.mlp.experts.down_proj.scales" && (p.Shape[2] != 96/group || p.DType.Size() != 1) {
					t.Errorf("%s: %v %s", p.Name, p.Shape, p.DType)
				}
			}
		})
	}
}
