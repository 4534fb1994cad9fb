//go:build linux

package cuda

import (
	"fmt"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// TestEngineRunAheadGPU: on the GPU the engine runs greedy decode ahead by
// default (engine.RunAheadAuto), the device resolving each step's feed
// tokens from the argmax rows of the step before. Several sequences, two
// of them ending on stop ids mid-way (the step queued ahead then holds
// rows that are dropped), must emit what step-by-step decode emits.
func TestEngineRunAheadGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	m := loadTinyLlamaQ4(t, b)
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

// TestEngineBatchInvarianceGPU: a greedy request gives the same tokens
// alone (one-row GEMVs, few-row prefill) as among 63 others, also when a
// small cache preempts and recomputes most of them, whose steps
// run the many-row products (qmm4 on this 4-bit fixture, bf16 operands)
// and batched decode attention. The fixture's random weights give flat
// logits, so a token may differ where the alone run's two best are within
// the bf16 rounding of the batched products (invarianceTie); the request
// is compared up to there, and every such place is logged.
func TestEngineBatchInvarianceGPU(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	m := loadTinyLlamaQ4(t, b)
	const n, invarianceTie = 64, 0.05
	var reqs []engine.Request
	for i := range n {
		p := []int32{1}
		for j := range 2 + i%13 {
			p = append(p, int32(2+(i*53+j*17)%(m.Vocab()-2)))
		}
		reqs = append(reqs, engine.Request{Prompt: p, MaxTokens: 40, IgnoreEOS: true, Params: sample.Params{Logprobs: 2}})
	}
	gen := func(parallel, blocks int, rs []engine.Request) ([]enginetest.Output, engine.Stats) {
		e, err := engine.New(m, engine.Config{Parallel: parallel, MaxContext: 256, BlockSize: 16, NumBlocks: blocks})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Stop()
		return enginetest.Generate(t, e, rs), e.Stats()
	}
	together, _ := gen(n, 0, reqs)
	// 40 blocks of 16 tokens hold about 10 of the 64 sequences at their
	// full length (up to 55 tokens): the others wait, and running ones
	// that outgrow the cache are preempted and recomputed (11 times on the
	// CPU backend, where every request then still equals its run alone).
	preempted, st := gen(n, 40, reqs)
	if st.Preemptions == 0 {
		t.Errorf("no preemptions with 40 KV blocks for %d sequences", n)
	}
	alone := make([]enginetest.Output, n)
	for i := range reqs {
		out, _ := gen(1, 0, reqs[i:i+1])
		alone[i] = out[0]
	}
	for _, run := range []struct {
		name string
		outs []enginetest.Output
	}{{fmt.Sprintf("among %d", n), together}, {fmt.Sprintf("among %d, preempted (%d preemptions)", n, st.Preemptions), preempted}} {
		same, ties := 0, 0
		for i := range reqs {
			got, want := run.outs[i], alone[i]
			for j, tok := range want.Tokens {
				if j >= len(got.Tokens) {
					t.Errorf("request %d: %d tokens %s, %d alone", i, len(got.Tokens), run.name, len(want.Tokens))
					break
				}
				if d := math.Abs(float64(got.Logprobs[j] - want.Logprobs[j])); got.Tokens[j] == tok && d > invarianceTie {
					t.Errorf("request %d token %d: logprob %.4f %s, %.4f alone", i, j, got.Logprobs[j], run.name, want.Logprobs[j])
				}
				if got.Tokens[j] == tok {
					if j == len(want.Tokens)-1 {
						same++
					}
					continue
				}
				top := want.Top[j]
				gap := math.Inf(1)
				if len(top) >= 2 {
					gap = float64(top[0].Logprob - top[1].Logprob)
				}
				if gap > invarianceTie {
					t.Errorf("request %d token %d: %d %s, %d alone, where alone its best two are %.4f apart", i, j, got.Tokens[j], run.name, tok, gap)
				} else {
					ties++
				}
				break
			}
		}
		t.Logf("%s: %d of %d requests identical to their run alone, %d parted at a near tie", run.name, same, n, ties)
	}
}

// loadTinyLlamaQ4 loads the 4-bit tiny Llama fixture on b; a missing
// fixture fails the test.
func loadTinyLlamaQ4(t *testing.T, b *Backend) *model.Model {
	t.Helper()
	fixture := testdataDir() + "/tiny/llama-mlx-q4g64"
	if _, err := os.Stat(fixture); err != nil {
		t.Fatalf("no fixture at %s: %v", fixture, err)
	}
	m, err := model.Load(fixture, b, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
