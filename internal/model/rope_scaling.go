package model

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/weights"
)

// The context-extension ropes, as transformers' modeling_rope_utils
// computes them: the frequency arithmetic in float32 like its tensors, the
// scalar arithmetic (correction range, attention factor) in float64 like
// its Python floats. Each returns the attention factor, which multiplies
// cos and sin.

// ropeFactor is the configured factor, or the ratio of the extended to the
// original context when the config gives none (transformers' fallback).
func ropeFactor(r weights.RopeConfig) float64 {
	if r.Factor > 0 {
		return r.Factor
	}
	if r.OriginalMaxPosition > 0 && r.MaxPosition > 0 {
		return float64(r.MaxPosition) / float64(r.OriginalMaxPosition)
	}
	return 1
}

// posFreq is base^(2i/dim) in float32, the reciprocal of the default
// rope's inverse frequency i.
func posFreq(base float64, i, dim int) float32 {
	return float32(math.Pow(float64(float32(base)), float64(float32(2*i)/float32(dim))))
}

// yarnMscale is YaRN's attention temperature 0.1*m*ln(s)+1 (1 for s <= 1).
func yarnMscale(s, m float64) float64 {
	if s <= 1 {
		return 1
	}
	return 0.1*m*math.Log(s) + 1
}

// yarnScale rewrites inv (the default frequencies over dim rotated
// dimensions) as YaRN's blend: frequencies that turn fewer than beta_slow
// times over the original context are interpolated (divided by factor),
// those turning more than beta_fast times are kept, with a linear ramp
// over the dimensions between. truncate rounds the ramp's bounds outwards
// to whole dimensions (gpt-oss sets it false).
func yarnScale(inv []float32, r weights.RopeConfig, dim int) float32 {
	factor := ropeFactor(r)
	betaFast, betaSlow := r.BetaFast, r.BetaSlow
	if betaFast == 0 {
		betaFast = 32
	}
	if betaSlow == 0 {
		betaSlow = 1
	}
	// The dimension whose frequency turns rot times over the context.
	corr := func(rot float64) float64 {
		return float64(dim) * math.Log(float64(r.OriginalMaxPosition)/(rot*2*math.Pi)) / (2 * math.Log(r.Theta))
	}
	low, high := corr(betaFast), corr(betaSlow)
	if r.Truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = math.Max(low, 0), math.Min(high, float64(dim-1))
	if low == high {
		high += 0.001 // transformers' guard against a zero-width ramp
	}
	span := float32(high - low)
	for i := range inv {
		pos := posFreq(r.Theta, i, dim)
		extrap := 1 / pos
		interp := 1 / (float32(factor) * pos)
		ramp := min(max((float32(i)-float32(low))/span, 0), 1)
		keep := 1 - ramp // the share of the unscaled frequency
		inv[i] = interp*(1-keep) + extrap*keep
	}
	attn := r.AttentionFactor
	switch {
	case attn > 0:
	case r.Mscale != 0 && r.MscaleAllDim != 0:
		attn = yarnMscale(factor, r.Mscale) / yarnMscale(factor, r.MscaleAllDim)
	default:
		attn = yarnMscale(factor, 1)
	}
	return float32(attn)
}

// longropeScale divides each frequency by its long_factor entry (Phi-3's
// LongRoPE). transformers switches from short_factor to long_factor once a
// forward call reaches past original_max_position_embeddings, which a KV
// cache holding keys rotated the other way cannot follow; the engine
// serves the whole max_position_embeddings context, so it takes the long
// factors whenever that context exceeds the original one (as llama.cpp
// does for a context longer than the original), the short ones otherwise.
func longropeScale(inv []float32, r weights.RopeConfig) (float32, error) {
	ext := r.ShortFactor
	if r.MaxPosition > r.OriginalMaxPosition {
		ext = r.LongFactor
	}
	if len(ext) != len(inv) {
		return 0, fmt.Errorf("longrope: %d factors for %d rotary frequencies", len(ext), len(inv))
	}
	dim := 2 * len(inv)
	for i := range inv {
		inv[i] = 1 / (float32(ext[i]) * posFreq(r.Theta, i, dim))
	}
	attn := r.AttentionFactor
	if attn == 0 {
		attn = 1
		if f := ropeFactor(r); f > 1 {
			attn = math.Sqrt(1 + math.Log(f)/math.Log(float64(r.OriginalMaxPosition)))
		}
	}
	return float32(attn), nil
}
