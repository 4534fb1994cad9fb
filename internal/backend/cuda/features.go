//go:build linux

package cuda

import "github.com/mlxcel/mlxcel/internal/backend"

// cudaFeatures are the backend.Features the CUDA backend runs: model
// families that need others refuse it at load.
var cudaFeatures = map[backend.Feature]bool{
	backend.FeatureAttentionSinks: true, // AttnParams.Sinks in attention, attn_decode, flash2_attn
	backend.FeatureSharedKV:       true, // nil k and v: attention over the owning layer's cache
	backend.FeatureMoEBiases:      true, // router and expert biases (moe_ext.go)
	backend.FeatureSwiGLUClamped:  true, // moe_swiglu
	backend.FeatureMoERouted:      true, // MoERouted and Experts.Scale
	backend.FeatureFPQuant:        true, // mxfp4, nvfp4, mxfp8 weights (fpquant.go)
	backend.FeatureGatedDeltaNet:  true, // ops_deltanet.go, kernels/deltanet.cu
	backend.FeatureSigmoidGate:    true, // gated_sigmoid
}

// Supports reports whether the backend runs f (backend.Featurer).
func (b *Backend) Supports(f backend.Feature) bool {
	return cudaFeatures[f]
}

// CheckKVDtype refuses the KV dtypes the store does not keep
// (backend.KVDtypeChecker), as NewKVStore does.
func (b *Backend) CheckKVDtype(d backend.KVDtype) error { return checkKVDtype(d) }
