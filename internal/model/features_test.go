package model_test

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// plain is a backend that declares no backend.Features (the CPU backend's
// ops, without its Supports method).
type plain struct{ backend.Backend }

// gpt-oss, Qwen3.5 and floating-point-quantized weights are refused by
// name on a backend that does not declare what they need, instead of
// running there without sinks, biases, the linear-attention layers or the
// right decode.
func TestFeaturesRefused(t *testing.T) {
	be := plain{cpu.New(1)}
	_, err := model.Load(testdata+"tiny/gpt_oss-bf16", be, model.LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "attention sinks") || !strings.Contains(err.Error(), "cpu backend") {
		t.Fatalf("gpt-oss on a backend without sinks: %v", err)
	}
	for _, f := range []string{"tiny/qwen3_5_text-bf16", "tiny/qwen3_5_moe_text-mlx-q4g64"} {
		_, err = model.Load(testdata+f, be, model.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), "Gated DeltaNet") || !strings.Contains(err.Error(), "cpu backend") {
			t.Fatalf("%s on a backend without Gated DeltaNet: %v", f, err)
		}
	}
	h := &tensor.Host{Name: "m.weight", Shape: []int{2, 32}, DType: tensor.U32, Data: make([]byte, 32),
		Quant: &tensor.Quant{Bits: 4, GroupSize: 32, Mode: "mxfp4", Scales: make([]byte, 2), ScaleDType: tensor.U8}}
	if _, err := backend.Upload(be, h); err == nil || !strings.Contains(err.Error(), "m.weight") || !strings.Contains(err.Error(), "mxfp4") {
		t.Fatalf("mxfp4 weight on a backend without FeatureFPQuant: %v", err)
	}
	if _, err := backend.Upload(cpu.New(1), h); err != nil {
		t.Fatalf("the CPU backend refused an mxfp4 weight: %v", err)
	}
}
