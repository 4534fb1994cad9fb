package engine_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// TestRunAheadMatchesStepByStep: greedy decode with each step queued
// before the previous step's ids are read (engine.RunAheadAlways; on the
// CPU the model resolves the feed tokens from the last ids) must emit
// exactly what step-by-step decode emits, also when sequences of one batch
// end at different steps on a stop id or their length limit (the step
// queued ahead then holds rows that are dropped, and the steps after it
// name the surviving rows by their place in it).
func TestRunAheadMatchesStepByStep(t *testing.T) {
	m := loadStories(t)
	var reqs []engine.Request
	for i := range 6 {
		p := []int32{1}
		for j := range 2 + i*5 {
			p = append(p, int32(5+(i*71+j*13)%400))
		}
		reqs = append(reqs, engine.Request{Prompt: p, MaxTokens: 12 + i*9, IgnoreEOS: true})
	}
	run := func(mode engine.RunAheadMode, reqs []engine.Request) ([]enginetest.Output, engine.Stats) {
		e, err := engine.New(m, engine.Config{Parallel: 6, MaxQueue: 8, RunAhead: mode})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		res := generate(t, e, reqs)
		// The loop publishes a step's counters after sending its tokens:
		// read them once it has stopped.
		e.Stop()
		return res, e.Stats()
	}
	want, _ := run(engine.RunAheadOff, reqs)
	// Stop ids taken from the step-by-step output: request 1 ends on its
	// 5th token, request 4 on its 11th, while the others go on.
	reqs[1].StopIDs, reqs[1].IgnoreEOS = []int32{want[1].Tokens[4]}, false
	reqs[4].StopIDs, reqs[4].IgnoreEOS = []int32{want[4].Tokens[10]}, false
	want, wst := run(engine.RunAheadOff, reqs)
	got, gst := run(engine.RunAheadAlways, reqs)
	for i := range reqs {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) || got[i].Reason != want[i].Reason {
			t.Errorf("request %d: run ahead %v (%s)\nstep by step %v (%s)", i, got[i].Tokens, got[i].Reason, want[i].Tokens, want[i].Reason)
		}
	}
	if want[1].Reason != engine.FinishStop || want[4].Reason != engine.FinishStop || want[0].Reason != engine.FinishLength {
		t.Fatalf("finish reasons %q %q %q: the stop ids did not end the requests", want[0].Reason, want[1].Reason, want[4].Reason)
	}
	if gst.RunAheadSteps == 0 || wst.RunAheadSteps != 0 {
		t.Errorf("steps run ahead: %d with RunAheadAlways, %d with RunAheadOff", gst.RunAheadSteps, wst.RunAheadSteps)
	}
	if gst.DecodeTokens != wst.DecodeTokens || gst.KVBlocksUsed != 0 || gst.Running != 0 {
		t.Errorf("decode tokens %d against %d, blocks in use %d, running %d", gst.DecodeTokens, wst.DecodeTokens, gst.KVBlocksUsed, gst.Running)
	}
	t.Logf("run ahead: %d of %d steps", gst.RunAheadSteps, gst.Steps)
}

// TestRunAheadStopsForCancelAndArrivals: a request cancelled while steps
// run ahead ends and frees its blocks, and a request submitted meanwhile
// is admitted; the others keep their step-by-step output, greedy and
// seeded sampled (the steps ahead then sample on the device).
func TestRunAheadStopsForCancelAndArrivals(t *testing.T) {
	m := loadStories(t)
	seed := uint64(77)
	for _, p := range []sample.Params{{}, {Temperature: 0.9, TopP: 0.95, Seed: &seed}} {
		t.Run(fmt.Sprintf("temperature %g", p.Temperature), func(t *testing.T) { runAheadCancel(t, m, p) })
	}
}

func runAheadCancel(t *testing.T, m engine.Model, p sample.Params) {
	base := []engine.Request{
		{Prompt: []int32{1, 40, 41}, MaxTokens: 60, IgnoreEOS: true},
		{Prompt: []int32{1, 90}, MaxTokens: 60, IgnoreEOS: true},
	}
	late := engine.Request{Prompt: []int32{1, 300, 301, 302}, MaxTokens: 20, IgnoreEOS: true}
	for i := range base {
		base[i].Params = p
	}
	late.Params = p
	ref, err := engine.New(m, engine.Config{Parallel: 3, RunAhead: engine.RunAheadOff})
	if err != nil {
		t.Fatal(err)
	}
	want := generate(t, ref, []engine.Request{base[0], late})
	ref.Stop()

	e, err := engine.New(m, engine.Config{Parallel: 3, RunAhead: engine.RunAheadAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	s0, err := e.Submit(context.Background(), base[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s1, err := e.Submit(ctx, base[1])
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	var first []int32
	var sLate *engine.Stream
	for ev := range s0.Events() {
		if ev.Done {
			if ev.FinishReason != engine.FinishLength {
				t.Errorf("request 0 finished %q (%v)", ev.FinishReason, ev.Err)
			}
			break
		}
		first = append(first, ev.Token)
		if len(first) == 10 {
			cancel()
			if sLate, err = e.Submit(context.Background(), late); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range s1.Events() { // a cancelled stream closes, its last events may be dropped
	}
	var lateTokens []int32
	for ev := range sLate.Events() {
		if !ev.Done {
			lateTokens = append(lateTokens, ev.Token)
		}
	}

	if !slices.Equal(first, want[0].Tokens) || !slices.Equal(lateTokens, want[1].Tokens) {
		t.Errorf("outputs differ from step by step:\n%v\n%v\nlate %v\n%v", first, want[0].Tokens, lateTokens, want[1].Tokens)
	}
	e.Stop()
	st := e.Stats()
	if st.KVBlocksUsed != 0 || st.RunAheadSteps == 0 || st.Cancelled != 1 || st.Finished != 3 {
		t.Errorf("after all ended: %d blocks in use, %d steps run ahead, %d cancelled, %d finished", st.KVBlocksUsed,
			st.RunAheadSteps, st.Cancelled, st.Finished)
	}
	if sampled := p.Temperature > 0; sampled != (st.RunAheadSampled > 0) {
		t.Errorf("%d sampled steps run ahead at temperature %g", st.RunAheadSampled, p.Temperature)
	}
}
