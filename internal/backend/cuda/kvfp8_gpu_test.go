//go:build linux

package cuda

import (
	"math"
	"os"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/backendtest"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// TestConformanceKVFP8 runs the attention cases over fp8 (E4M3) stores
// against the CPU backend's fp8 store (backendtest.RunKV): kv_store_f8,
// attention_f8, flash2_attn_*_f8 (prefill steps of 16+ rows),
// attn_dtile_*_f8 (decode steps by default; its partials-and-ticket merge
// with ticketmerge) and the attn_decode_*_f8 family (notile, and the
// tunings that pick each of its forms, as TestConformanceVariants does
// for f16).
func TestConformanceKVFP8(t *testing.T) {
	for _, v := range []struct {
		name string
		set  func(*plan.Tuning)
	}{
		{"default", nil},
		{"ticketmerge", func(u *plan.Tuning) { u.DecClusterMax = 0 }},
		{"notile", func(u *plan.Tuning) { u.DecTileMinTokens = 0 }},
		{"notileticket", func(u *plan.Tuning) { u.DecTileMinTokens, u.DecClusterMax = 0, 0 }},
		{"notilewholegroups", func(u *plan.Tuning) { u.DecTileMinTokens, u.DecHeads = 0, 0 }},
		{"notilelongheads4", func(u *plan.Tuning) { u.DecTileMinTokens, u.DecLongHeads = 0, 4 }},
		{"notilesplitkeys8", func(u *plan.Tuning) { u.DecTileMinTokens, u.DecSplitKeys = 0, 8 }},
	} {
		t.Run(v.name, func(t *testing.T) {
			b := newOrSkip(t)
			defer b.Close()
			if v.set != nil {
				before := b.Tuning
				v.set(&b.Tuning)
				if b.Tuning == before {
					t.Fatalf("%s left the tuning at its default on %s", v.name, b.Info())
				}
			}
			backendtest.RunKV(t, b, backend.KVFP8)
		})
	}
}

// kvFP8Bound is, per fixture, the bound on |logit difference| between the
// fp8 and the f16 (auto) cache on the GPU, and between the GPU's and the
// CPU's fp8 caches: the CPU's fp8-vs-f32 bound (engine.kvTolerance,
// docs/kv-cache.md "Measured accuracy"), since f16 is as close to f32 as
// fp8 is far from it and both backends store the same codes.
var kvFP8Bound = map[string]float64{
	"llama-bf16": 0.15, "qwen3-bf16": 0.12, "qwen2-bf16": 1.0, "mixtral-bf16": 1.2,
	"gemma3_text-bf16": 0.4, "gemma4-bf16": 0.5, "gemma4_e-bf16": 1.0, "gpt_oss-bf16": 0.8,
}

// TestKVFP8ModelsGPU runs each fixture's reference prompt (a prefill of
// 16+ tokens: flash2) and 32 greedy decode steps (attn_dtile, or
// attn_decode with "notile"; the generic kernel at the fixtures' head dims 16/32, and
// with sinks, attn_decode) on the GPU's f16 cache, then feeds the same ids
// through the GPU's fp8 cache and the CPU's: logits within kvFP8Bound of
// both, and the f16 cache's greedy id wherever its top-2 gap is at least
// the bound (closer steps are ties E4M3's rounding may flip: counted and
// logged).
func TestKVFP8ModelsGPU(t *testing.T) {
	dir := testdataDir()
	const steps = 32
	for _, tile := range []bool{true, false} {
		for _, name := range []string{"llama-bf16", "qwen3-bf16", "qwen2-bf16", "mixtral-bf16", "gemma3_text-bf16",
			"gemma4-bf16", "gemma4_e-bf16", "gpt_oss-bf16"} {
			sub := name
			if !tile {
				sub += "/notile"
			}
			t.Run(sub, func(t *testing.T) {
				f := dir + "/tiny/" + name
				if _, err := os.Stat(f); err != nil {
					t.Fatalf("fixture %s missing (MLXCEL_TESTDATA or ../shared/testdata): %v", f, err)
				}
				ref, err := modeltest.LoadReference(f)
				if err != nil {
					t.Fatal(err)
				}
				b := newOrSkip(t)
				defer b.Close()
				if !tile {
					b.DecTileMinTokens = 0
				}
				m, err := model.Load(f, b, model.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				mc, err := model.Load(f, cpu.New(2), model.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ids := make([]int32, steps)
				want := modeltest.DecodeLogits(t, m, backend.KVAuto, ref.InputIDs, ids, true)
				got := modeltest.DecodeLogits(t, m, backend.KVFP8, ref.InputIDs, ids, false)
				cpu8 := modeltest.DecodeLogits(t, mc, backend.KVFP8, ref.InputIDs, ids, false)
				bound := kvFP8Bound[name]
				worst, vsCPU, ties, flips := 0.0, 0.0, 0, 0
				for i := range got {
					for j, x := range got[i] {
						worst = max(worst, math.Abs(float64(x-want[i][j])))
						vsCPU = max(vsCPU, math.Abs(float64(x-cpu8[i][j])))
					}
					g := modeltest.Argmax(got[i])
					if modeltest.Top2Gap(want[i]) < bound {
						ties++
						if g != ids[i] {
							flips++
						}
						continue
					}
					if g != ids[i] {
						t.Errorf("step %d: greedy id %d on the fp8 cache, %d on the f16 one (top-2 gap %.3g)", i, g, ids[i], modeltest.Top2Gap(want[i]))
					}
				}
				t.Logf("fp8 vs f16 cache: max |logit difference| %.3g; fp8 vs the CPU's fp8: %.3g (bound %.3g); %d of %d steps ties, %d flipped",
					worst, vsCPU, bound, ties, steps, flips)
				if worst > bound || vsCPU > bound {
					t.Errorf("logits differ by up to %.3g (f16 cache) and %.3g (CPU fp8 cache), over the bound %.3g", worst, vsCPU, bound)
				}
			})
		}
	}
}
