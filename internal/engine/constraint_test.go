package engine

import (
	"errors"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// scriptConstraint allows exactly one token per step, in order.
type scriptConstraint struct {
	script   []int32
	i        int
	accepted []int32
}

func (c *scriptConstraint) Mask(allowed []uint64) error {
	clear(allowed)
	if c.i >= len(c.script) {
		return errors.New("script over")
	}
	id := c.script[c.i]
	allowed[id/64] |= 1 << (id % 64)
	return nil
}

func (c *scriptConstraint) Accept(id int32) error {
	if id != c.script[c.i] {
		return errors.New("token not allowed")
	}
	c.accepted = append(c.accepted, id)
	c.i++
	return nil
}

// argmaxRefusing is the fake model with an argmax path that must not be
// taken by constrained requests.
type argmaxRefusing struct{ *fakeModel }

func (argmaxRefusing) ForwardArgmax(*backend.Batch, backend.KVStore) ([]int32, error) {
	return nil, errors.New("argmax path used")
}

// TestConstraintDrivesSampling: whatever the model prefers, greedy or at
// temperature 1, a constrained request samples only the allowed tokens,
// ends on the stop id, and never takes the argmax-only path; an
// unconstrained greedy request beside it still does (and fails here).
func TestConstraintDrivesSampling(t *testing.T) {
	m := argmaxRefusing{newFake()}
	e := newEngine(t, m, Config{Parallel: 4})
	e.Start()
	seed := uint64(7)
	script := []int32{10, 20, 30, 90, 3}
	for _, p := range []sample.Params{{}, {Temperature: 1, TopP: 1, RepetitionPenalty: 1, Seed: &seed}} {
		c := &scriptConstraint{script: script}
		r := collect(t, submit(t, e, Request{Prompt: prompt(9, 1), Params: p, MaxTokens: 20, StopIDs: []int32{3}, Constraint: c}))
		if r.last.FinishReason != FinishStop || r.last.Err != nil {
			t.Fatalf("finish %q err %v", r.last.FinishReason, r.last.Err)
		}
		if !slices.Equal(r.tokens, script[:4]) || !slices.Equal(c.accepted, script) {
			t.Fatalf("tokens %v accepted %v, want %v", r.tokens, c.accepted, script)
		}
	}
	r := collect(t, submit(t, e, Request{Prompt: prompt(9, 1), MaxTokens: 3}))
	if r.last.Err == nil {
		t.Fatal("the unconstrained greedy request did not take the argmax path")
	}
	// A constraint that allows nothing ends its request with an error.
	c := &scriptConstraint{}
	r = collect(t, submit(t, e, Request{Prompt: prompt(5, 2), MaxTokens: 3, Constraint: c}))
	if r.last.FinishReason != FinishError || r.last.Err == nil {
		t.Fatalf("finish %q err %v, want an error", r.last.FinishReason, r.last.Err)
	}
}
