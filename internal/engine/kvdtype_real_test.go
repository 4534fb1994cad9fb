package engine_test

import (
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/engine/enginetest"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

const tinyDir = "../../../shared/testdata/tiny/"

// kvTolerance is, per fixture, the bound on |logit(fp8 cache) -
// logit(f32 cache)| over the reference prompt and 32 greedy steps: the
// measured worst (docs/kv-cache.md) with ~1.5x headroom. The fixtures'
// random weights make flat attention, so E4M3's 3 mantissa bits show
// fully; the bf16 cache must stay within an eighth of it (4 more mantissa
// bits, 16x finer rounding). The families cover GQA with and without q/k
// norms, Gemma 4's sliding, KV-shared and k_eq_v layers, gpt-oss's sinks
// and sliding layers, Qwen3.5's attention beside DeltaNet.
var kvTolerance = map[string]float64{
	"llama-bf16": 0.15, "qwen3-bf16": 0.12, "qwen2-bf16": 1.0, "mixtral-bf16": 1.2,
	"gemma3_text-bf16": 0.4, "gemma4-bf16": 0.5, "gemma4_e-bf16": 1.0,
	"gpt_oss-bf16": 0.8, "qwen3_5_text-bf16": 0.03,
}

// TestKVDtypeAccuracy compares the fp8 and bf16 caches with the f32 one
// on the fixtures: logits within kvTolerance (bf16: an eighth), and the
// f32 run's greedy id on every step whose top-2 gap in the f32 run is at
// least the tolerance (closer ones are ties the rounding may flip; they
// are counted and logged).
func TestKVDtypeAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("loads models")
	}
	const steps = 32
	for _, name := range slices.Sorted(maps.Keys(kvTolerance)) {
		t.Run(name, func(t *testing.T) {
			dir := tinyDir + name
			ref, err := modeltest.LoadReference(dir)
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(dir, cpu.New(2), model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]int32, steps)
			want := modeltest.DecodeLogits(t, m, backend.KVF32, ref.InputIDs, ids, true)
			for _, dt := range []backend.KVDtype{backend.KVFP8, backend.KVBF16} {
				tol := kvTolerance[name]
				if dt == backend.KVBF16 {
					tol /= 8
				}
				got := modeltest.DecodeLogits(t, m, dt, ref.InputIDs, ids, false)
				worst, ties, flips := 0.0, 0, 0
				for i := range got {
					for j, x := range got[i] {
						worst = max(worst, math.Abs(float64(x-want[i][j])))
					}
					g := modeltest.Argmax(got[i])
					if modeltest.Top2Gap(want[i]) < tol {
						ties++
						if g != ids[i] {
							flips++
						}
						continue
					}
					if g != ids[i] {
						t.Errorf("%s step %d: greedy id %d, the f32 cache's %d (top-2 gap %.3g)", dt, i, g, ids[i], modeltest.Top2Gap(want[i]))
					}
				}
				t.Logf("%s: max |logit difference| %.3g (tolerance %.3g), %d of %d steps skipped as ties, %d of them flipped", dt, worst, tol, ties, steps, flips)
				if worst > tol {
					t.Errorf("%s: logits differ by up to %.3g, over the tolerance %.3g", dt, worst, tol)
				}
			}
		})
	}
}

// TestFP8EngineBatched runs requests batched on the fp8 cache (rings for
// Gemma 4's sliding layers, prefill chunks, preemption): each one's
// tokens must equal running it alone on the fp8 cache, since the stored
// codes and the attention over them do not depend on the batch. The
// estimate the server and memplan use (engine.KVSpec, KVStoreBytes) must
// be the store the engine allocated.
func TestFP8EngineBatched(t *testing.T) {
	if testing.Short() {
		t.Skip("loads models")
	}
	for _, name := range []string{"llama-bf16", "gemma4-bf16"} {
		t.Run(name, func(t *testing.T) {
			be := cpu.New(2)
			m, err := model.Load(tinyDir+name, be, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var reqs []engine.Request
			for i := range 6 {
				p := []int32{2}
				for j := range 3 + i*9 {
					p = append(p, int32(3+(i*53+j*29)%500))
				}
				reqs = append(reqs, engine.Request{Prompt: p, MaxTokens: 20 + i*3, IgnoreEOS: true})
			}
			alone, err := engine.New(m, engine.Config{Parallel: 1, PrefillChunk: 512, MaxContext: 256, KVDtype: backend.KVFP8})
			if err != nil {
				t.Fatal(err)
			}
			want := make([]enginetest.Output, len(reqs))
			for i, r := range reqs {
				want[i] = generate(t, alone, []engine.Request{r})[0]
			}
			alone.Stop()
			cfg := engine.Config{Parallel: 4, PrefillChunk: 12, BlockSize: 16, NumBlocks: 12, KVDtype: backend.KVFP8}
			batched, err := engine.New(m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer batched.Stop()
			spec := batched.KVStore().Spec()
			if est := engine.KVSpec(be, cfg, m.KVLayers()); !slices.Equal(est.Layers, spec.Layers) || est.NumBlocks != spec.NumBlocks || est.RingTokens != spec.RingTokens || est.Dtype != spec.Dtype {
				t.Fatalf("estimated store %+v, allocated %+v", est, spec)
			}
			if name == "gemma4-bf16" && spec.RingTokens == 0 {
				t.Fatal("the batched engine keeps the sliding layers paged; the test wants rings")
			}
			got := generate(t, batched, reqs)
			for i := range reqs {
				if !slices.Equal(got[i].Tokens, want[i].Tokens) {
					t.Errorf("request %d: batched %v\nalone   %v", i, got[i].Tokens, want[i].Tokens)
				}
			}
		})
	}
}
