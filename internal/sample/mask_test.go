package sample

import "testing"

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
