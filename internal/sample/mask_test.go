package sample

import (
	"math"
	"testing"
)

func TestApplyMaskThroughSampler(t *testing.T) {
	logits := make([]float32, 130)
	for i := range logits {
		logits[i] = float32(i % 7)
	}
	allowed := make([]uint64, 3)
	allowed[1] = 1 << 3 // token 67 only
	ApplyMask(logits, allowed)
	s := New(Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}, len(logits))
	for range 50 {
		if got := s.Sample(logits, nil, nil); got.ID != 67 || got.Logprob != 0 {
			t.Fatalf("sampled %d (logprob %v), want 67 (0)", got.ID, got.Logprob)
		}
	}
}

// TestApplyMaskBits checks every bit pattern class against a plain loop:
// full words, empty words, mixed words and the short last word.
func TestApplyMaskBits(t *testing.T) {
	const n = 64*5 + 17
	allowed := []uint64{^uint64(0), 0, 0x8000_0000_0000_0001, 0x5555_5555_5555_5555, 0xFFFF_0000_FFFF_0000, 0x1_0001}
	logits := make([]float32, n)
	for i := range logits {
		logits[i] = float32(i)
	}
	ApplyMask(logits, allowed)
	for i, v := range logits {
		keep := allowed[i/64]&(1<<(i%64)) != 0
		if keep != (v == float32(i)) || (!keep && !math.IsInf(float64(v), -1)) {
			t.Fatalf("logit %d = %v, allowed %v", i, v, keep)
		}
	}
}
