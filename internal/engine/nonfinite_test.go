package engine

import (
	"errors"
	"math"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// nanModel is the fake model with one logit of every row replaced.
type nanModel struct {
	*fakeModel
	value float32
}

func (m nanModel) Forward(b *backend.Batch, kv backend.KVStore) ([]float32, error) {
	l, err := m.fakeModel.Forward(b, kv)
	for i := 0; i < len(l); i += m.vocab {
		l[i+3] = m.value
	}
	return l, err
}

// TestNonFiniteLogitsFail: NaN or +Inf logits end the request with
// ErrNonFiniteLogits and no token, whatever the sampling parameters; a
// -Inf logit is a mask and decodes normally.
func TestNonFiniteLogitsFail(t *testing.T) {
	e := newEngine(t, nanModel{newFake(), float32(math.Inf(-1))}, Config{})
	e.Start()
	if r := collect(t, submit(t, e, Request{Prompt: prompt(5, 1), Params: sample.DefaultParams(), MaxTokens: 8})); len(r.tokens) != 8 || r.last.Err != nil {
		t.Errorf("logit -Inf: %d tokens, err %v; want 8 tokens", len(r.tokens), r.last.Err)
	}
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		e := newEngine(t, nanModel{newFake(), v}, Config{})
		e.Start()
		p := sample.DefaultParams()
		r := collect(t, submit(t, e, Request{Prompt: prompt(5, 1), Params: p, MaxTokens: 8}))
		if len(r.tokens) != 0 || r.last.FinishReason != FinishError || !errors.Is(r.last.Err, ErrNonFiniteLogits) {
			t.Errorf("logit %v: %d tokens, reason %q, err %v; want an ErrNonFiniteLogits failure", v, len(r.tokens), r.last.FinishReason, r.last.Err)
		}
	}
}
