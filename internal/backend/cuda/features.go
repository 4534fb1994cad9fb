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
}

// Supports reports whether the backend runs f (backend.Featurer).
func (b *Backend) Supports(f backend.Feature) bool { return cudaFeatures[f] || deltaNetSupported(f) }
