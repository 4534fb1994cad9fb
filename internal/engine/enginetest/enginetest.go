// Package enginetest holds test helpers for code that drives an engine:
// the engine's own tests on the CPU and the CUDA backend's on the GPU.
package enginetest

import (
	"context"
	"sync"
	"testing"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// Output is what one request emitted.
type Output struct {
	Tokens   []int32
	Logprobs []float32
	Top      [][]sample.TokenLogprob // each token's top alternatives, when the request asked for them
	Reason   string                  // the finish reason
}

// Generate submits all of reqs, then starts e (a no-op when it runs
// already), so a fresh engine sees them all in its first step and the
// schedule is deterministic. It returns each request's output; a request
// that ends with an error fails the test.
func Generate(t testing.TB, e *engine.Engine, reqs []engine.Request) []Output {
	t.Helper()
	res := make([]Output, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		s, err := e.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for ev := range s.Events() {
				if ev.Done {
					res[i].Reason = ev.FinishReason
					if ev.Err != nil {
						t.Errorf("request %d: %v", i, ev.Err)
					}
					continue
				}
				res[i].Tokens = append(res[i].Tokens, ev.Token)
				res[i].Logprobs = append(res[i].Logprobs, ev.Logprob)
				res[i].Top = append(res[i].Top, ev.Top)
			}
		})
	}
	e.Start()
	wg.Wait()
	return res
}
