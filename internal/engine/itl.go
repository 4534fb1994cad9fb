package engine

import "time"

// An inter-token latency target (Config.ITLTarget) bounds the steps that
// prefill beside running decodes by their expected time, not by a token
// count: the same 2048 tokens take ~65 ms on Llama-3.1-8B and ~0.2 s on
// Qwen3.5-35B-A3B on an H200, and ~1 s on Mixtral, so one token cap
// cannot hold the streams' latency for every model. The engine learns a
// step's cost from the steps it runs (Sarathi-Serve's stall-free batching
// picks its token budget from a profiled latency target the same way,
// offline) and caps the prefill of the next mixed step so that it is
// expected to end within the target.

// stepCost is what the engine has seen steps cost: a decode-only step,
// and each prompt token a step prefills on top of that, as moving
// averages.
type stepCost struct {
	decode, perToken float64 // seconds
	haveDecode       bool
	haveToken        bool
}

const (
	// stepCostWeight is the weight of the newest step in the averages.
	stepCostWeight = 0.2
	// minCostTokens: steps that prefill fewer tokens are not used to learn
	// the per-token cost (their fixed part would dominate it).
	minCostTokens = 256
	// MinMixedPrefill is the least prefill a mixed step gets under an
	// inter-token latency target, so that a prompt always progresses.
	MinMixedPrefill = 256
)

func ewma(old, v float64, have bool) float64 {
	if !have {
		return v
	}
	return old + stepCostWeight*(v-old)
}

// observe records a step that prefilled prefill tokens and decoded decode
// rows in d.
func (c *stepCost) observe(prefill, decode int, d time.Duration) {
	s := d.Seconds()
	switch {
	case prefill == 0 && decode > 0:
		c.decode, c.haveDecode = ewma(c.decode, s, c.haveDecode), true
	case prefill >= minCostTokens:
		extra := s
		if c.haveDecode && decode > 0 {
			extra = max(0, s-c.decode)
		}
		c.perToken, c.haveToken = ewma(c.perToken, extra/float64(prefill), c.haveToken), true
	}
}

// prefillBudget is how many prompt tokens a step that also decodes may
// carry to end within target, at least MinMixedPrefill; 0 while no step
// has shown what prefill costs.
func (c *stepCost) prefillBudget(target time.Duration) int {
	if !c.haveToken || c.perToken <= 0 {
		return 0
	}
	room := target.Seconds()
	if c.haveDecode {
		room -= c.decode
	}
	n := int(room / c.perToken)
	return max(n, MinMixedPrefill)
}
