package model

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// ropeFor turns a config's rope block into the backend's description for
// heads of headDim. Frequencies are computed in float32 as transformers
// does, so angles round the same way as the reference.
func ropeFor(r weights.RopeConfig, headDim int) (backend.RoPE, error) {
	rot := headDim
	if r.PartialRotaryFactor > 0 && r.PartialRotaryFactor < 1 {
		rot = int(float64(headDim) * r.PartialRotaryFactor)
	}
	if rot%2 != 0 || rot <= 0 {
		return backend.RoPE{}, fmt.Errorf("rotary dim %d must be even and positive", rot)
	}
	half := rot / 2
	inv := make([]float32, half)
	base := float32(r.Theta)
	for i := range inv {
		inv[i] = 1 / float32(math.Pow(float64(base), float64(float32(2*i)/float32(rot))))
	}
	out := backend.RoPE{InvFreq: inv, RotaryDim: rot, Scale: 1}
	switch r.Type {
	case "default":
	case "linear":
		for i := range inv {
			inv[i] /= float32(r.Factor)
		}
	case "llama3":
		llama3Scale(inv, r)
	case "proportional":
		// Proportional RoPE rotates the first fraction of the head with
		// frequencies spaced over the whole head dim; the rest of the
		// pairs get frequency zero (an identity rotation).
		full := make([]float32, headDim/2)
		for i := range half {
			full[i] = 1 / float32(math.Pow(float64(base), float64(float32(2*i)/float32(headDim))))
		}
		out.InvFreq, out.RotaryDim = full, headDim
		if r.Factor > 0 {
			for i := range full {
				full[i] /= float32(r.Factor)
			}
		}
	default:
		return backend.RoPE{}, fmt.Errorf("unsupported rope_type %q", r.Type)
	}
	if r.AttentionFactorScaled > 0 {
		out.Scale = float32(r.AttentionFactorScaled)
	}
	return out, nil
}

// llama3Scale applies Llama 3.1's frequency-dependent scaling: long
// wavelengths are divided by factor, short ones kept, the band between
// interpolated smoothly.
func llama3Scale(inv []float32, r weights.RopeConfig) {
	old := float32(r.OriginalMaxPosition)
	lowWave := old / float32(r.LowFreqFactor)
	highWave := old / float32(r.HighFreqFactor)
	factor := float32(r.Factor)
	for i, f := range inv {
		wave := 2 * math.Pi / f
		scaled := f
		if wave > lowWave {
			scaled = f / factor
		}
		if !(wave < highWave) && !(wave > lowWave) {
			smooth := (old/wave - float32(r.LowFreqFactor)) / float32(r.HighFreqFactor-r.LowFreqFactor)
			scaled = (1-smooth)*scaled/factor + smooth*scaled
		}
		inv[i] = scaled
	}
}
