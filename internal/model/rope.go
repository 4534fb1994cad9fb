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
	if r.Type == "proportional" {
		return proportionalRope(r, headDim)
	}
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
	case "default", "dynamic":
		// Dynamic NTK equals the default rope up to
		// max_position_embeddings (transformers raises the base only for
		// longer sequences, per forward call, which a KV cache cannot
		// follow); MaxContext stops there.
	case "linear":
		for i := range inv {
			inv[i] /= float32(r.Factor)
		}
	case "llama3":
		llama3Scale(inv, r)
	case "yarn":
		out.Scale = yarnScale(inv, r, rot)
	case "longrope":
		s, err := longropeScale(inv, r)
		if err != nil {
			return backend.RoPE{}, err
		}
		out.Scale = s
	default:
		return backend.RoPE{}, fmt.Errorf("unsupported rope_type %q", r.Type)
	}
	return out, nil
}

// proportionalRope is transformers' "proportional" rope (Gemma 4 full
// attention, _compute_proportional_rope_parameters): the first
// floor(partial_rotary_factor*headDim/2) pairs get the frequencies of a
// full-width rope, base^(-2i/headDim) (spaced over the whole head, not
// over the rotated part as partial rope does), and the remaining pairs get
// frequency zero. Pairs still couple element i with i+headDim/2, so the
// whole head goes through rotate_half and the zero-frequency pairs come
// out unchanged (cos 1, sin 0). All frequencies are divided by factor
// (1 when absent); the attention factor is 1.
func proportionalRope(r weights.RopeConfig, headDim int) (backend.RoPE, error) {
	if headDim <= 0 || headDim%2 != 0 {
		return backend.RoPE{}, fmt.Errorf("proportional rope: head dim %d must be even and positive", headDim)
	}
	prf := r.PartialRotaryFactor
	if prf <= 0 {
		prf = 1
	}
	// Python's int(prf * head_dim // 2): floor division of a float.
	angles := min(int(math.Floor(prf*float64(headDim)/2)), headDim/2)
	inv := make([]float32, headDim/2)
	base := float32(r.Theta)
	factor := float32(1)
	if r.Factor > 0 {
		factor = float32(r.Factor)
	}
	for i := range angles {
		inv[i] = 1 / float32(math.Pow(float64(base), float64(float32(2*i)/float32(headDim)))) / factor
	}
	return backend.RoPE{InvFreq: inv, RotaryDim: headDim, Scale: 1}, nil
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
