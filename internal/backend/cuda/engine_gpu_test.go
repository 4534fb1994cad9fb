//go:build linux

package cuda

import (
	"os"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/model"
)

// TestEngineRunAheadGPU: on the GPU the engine runs greedy decode ahead by
// default (engine.RunAheadAuto), the device resolving each step's feed
// tokens from the argmax rows of the step before. Several sequences, two
// of them ending on stop ids mid-way (the step queued ahead then holds
// rows that are dropped), must emit what step-by-step decode emits.
func TestEngineRunAheadGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	fixture := testdataDir() + "/tiny/llama-mlx-q4g64"
	if _, err := os.Stat(fixture); err != nil {
		t.Fatalf("no fixture at %s: %v", fixture, err)
	}
	m, err := model.Load(fixture, b, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reqs []engine.Request
	for i := range 5 {
		p := []int32{1}
		for j := range 3 + 4*i {
			p = append(p, int32(2+(i*37+j*11)%(m.Vocab()-2)))
		}
		reqs = append(reqs, engine.Request{Prompt: p, MaxTokens: 10 + 6*i, IgnoreEOS: true})
	}
	run := func(mode engine.RunAheadMode) ([]enginetest.Output, engine.Stats) {
		e, err := engine.New(m, engine.Config{Parallel: 5, RunAhead: mode, MaxContext: 256})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		return enginetest.Generate(t, e, reqs), e.Stats()
	}
	want, _ := run(engine.RunAheadOff)
	reqs[1].StopIDs, reqs[1].IgnoreEOS = []int32{want[1].Tokens[3]}, false
	reqs[3].StopIDs, reqs[3].IgnoreEOS = []int32{want[3].Tokens[7]}, false
	want, _ = run(engine.RunAheadOff)
	got, st := run(engine.RunAheadAuto)
	for i := range reqs {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) || got[i].Reason != want[i].Reason {
			t.Errorf("request %d: run ahead %v (%s), step by step %v (%s)", i, got[i].Tokens, got[i].Reason, want[i].Tokens, want[i].Reason)
		}
	}
	if st.RunAheadSteps == 0 || st.KVBlocksUsed != 0 {
		t.Errorf("%d steps run ahead (want some on the GPU), %d blocks still in use", st.RunAheadSteps, st.KVBlocksUsed)
	}
	t.Logf("run ahead: %d of %d steps", st.RunAheadSteps, st.Steps)
}
