//go:build linux

package cuda

// hybridFixtures are the Qwen3.5 fixtures TestModelsGPU runs (Gated
// DeltaNet layers beside gated full attention; dense and MoE with a shared
// expert): each with its 80-token reference and, for the dense ones, the
// 130-token reference whose prefill crosses two chunks of the delta rule.
var hybridFixtures = []struct{ dir, ref string }{
	{"tiny/qwen3_5_text-bf16", ""}, {"tiny/qwen3_5_text-bf16", "reference_t130.safetensors"},
	{"tiny/qwen3_5_text-mlx-q4g64", ""}, {"tiny/qwen3_5_text-mlx-q4g64", "reference_t130.safetensors"},
	{"tiny/qwen3_5_moe_text-bf16", ""}, {"tiny/qwen3_5_moe_text-mlx-q4g64", ""},
}
