package model_test

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// Gemma 4's other sizes: the 26B-A4B MoE block beside the dense MLP, HF
// (gate_up_proj split in halves) and MLX (switch_glu, 8-bit router); the
// E-series' per-layer inputs and KV-shared layers (a sliding and a full
// one, the MLP of each double-wide). T=40 is past the window of 8, so the
// shared sliding layer reads its source's ring.
var gemma4SizeFixtures = []string{
	"tiny/gemma4_moe-bf16", "tiny/gemma4_moe-mlx-q4g64",
	"tiny/gemma4_e-bf16", "tiny/gemma4_e-mlx-q4g64",
}

func TestReferenceLogitsGemma4SizesCPU(t *testing.T) {
	for _, f := range gemma4SizeFixtures {
		t.Run(f, func(t *testing.T) {
			r := modeltest.Check(t, testdata+f, cpu.New(0), modeltest.Options{RelTol: 1e-3, NearTie: 1e-3, Prefix: 17})
			t.Logf("%s: full %.2e incremental %.2e greedy steps checked %d", f, r.FullRel, r.IncrRel, r.GreedyChecked)
		})
	}
}

// noFeatures is the CPU backend seen without its Featurer and RoutedMoE
// methods: a backend that runs only the base contract (as CUDA does) must
// refuse these sizes naming the feature, not compute wrong logits.
type noFeatures struct{ backend.Backend }

func TestGemma4SizesRefusedWithoutFeature(t *testing.T) {
	for f, feat := range map[string]backend.Feature{
		"tiny/gemma4_moe-bf16": backend.FeatureMoERouted,
		"tiny/gemma4_e-bf16":   backend.FeatureSharedKV,
	} {
		_, err := model.Load(testdata+f, noFeatures{cpu.New(1)}, model.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), string(feat)) {
			t.Errorf("%s: got %v, want a refusal naming %q", f, err, feat)
		}
	}
}
