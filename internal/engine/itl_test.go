package engine

import (
	"context"
	"slices"
	"testing"
	"time"
)

// The budget follows the costs seen: decode steps of 10 ms and 100 us a
// prompt token leave (50 - 10) ms / 100 us = 400 tokens of a 50 ms target;
// a slower prefill lowers it, never below MinMixedPrefill; short prefill
// steps teach nothing.
func TestStepCostBudget(t *testing.T) {
	var c stepCost
	if got := c.prefillBudget(50 * time.Millisecond); got != 0 {
		t.Fatalf("budget %d before any step, want 0 (no estimate)", got)
	}
	c.observe(0, 8, 10*time.Millisecond)
	c.observe(100, 8, 900*time.Millisecond) // too short to learn from
	if got := c.prefillBudget(50 * time.Millisecond); got != 0 {
		t.Fatalf("budget %d after a 100-token step, want 0", got)
	}
	c.observe(2000, 8, 210*time.Millisecond) // 200 ms on top of the decode step: 100 us a token
	if got := c.prefillBudget(50 * time.Millisecond); got < 399 || got > 400 {
		t.Fatalf("budget %d, want 400", got)
	}
	for range 40 { // the prefill gets ten times slower
		c.observe(2000, 8, 2010*time.Millisecond)
	}
	if got := c.prefillBudget(50 * time.Millisecond); got != MinMixedPrefill {
		t.Fatalf("budget %d at 1 ms a token, want the floor %d", got, MinMixedPrefill)
	}
	for range 40 {
		c.observe(0, 8, 5*time.Millisecond)
		c.observe(4000, 0, 200*time.Millisecond) // a prefill-only step: all of it counts
	}
	if got := c.prefillBudget(105 * time.Millisecond); got < 1950 || got > 2050 {
		t.Fatalf("budget %d at 50 us a token after 5 ms decode steps, want ~2000", got)
	}
}

// With an inter-token latency target the engine caps the steps that
// prefill beside a running decode by the cost it has seen: a target no
// step can meet gives them MinMixedPrefill tokens each, a generous one the
// whole prompt in one step (as without a target on the CPU, which has no
// token cap).
func TestITLTargetCapsMixedSteps(t *testing.T) {
	for _, c := range []struct {
		target time.Duration
		chunks []int
	}{
		{time.Nanosecond, []int{256, 256, 256, 256, 256, 256, 256, 208}},
		{time.Hour, []int{2000}},
	} {
		m := newFake()
		e := newEngine(t, m, Config{Parallel: 4, PrefillChunk: 4096, ITLTarget: c.target})
		e.Start()
		ctx, cancel := context.WithCancel(context.Background())
		// a's 300-token prompt is a prefill step long enough to learn from.
		a, err := e.Submit(ctx, Request{Prompt: prompt(300, 1), MaxTokens: 4000})
		if err != nil {
			t.Fatal(err)
		}
		<-a.Events() // a is decoding
		b := submit(t, e, Request{Prompt: prompt(2000, 2), MaxTokens: 3})
		res := collect(t, b)
		want, _ := reference(m.vocab, prompt(2000, 2), 3, nil)
		if !slices.Equal(res.tokens, want) {
			t.Fatalf("target %v: long prompt %v, want %v", c.target, res.tokens, want)
		}
		cancel()
		var chunks []int
		for _, lens := range m.recorded() {
			for _, n := range lens {
				if n > 1 && n != 300 {
					chunks = append(chunks, n)
				}
			}
		}
		if !slices.Equal(chunks, c.chunks) {
			t.Errorf("target %v: the long prompt's chunks %v, want %v", c.target, chunks, c.chunks)
		}
		e.Stop()
	}
}
