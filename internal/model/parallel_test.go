package model_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// loadTP loads a fixture over n in-process CPU ranks.
func loadTP(dir string, n int) (*model.Model, error) {
	bes := make([]backend.Backend, n)
	for r := range bes {
		bes[r] = cpu.New(1)
	}
	return model.LoadParallel(dir, bes, cpu.NewGroup(n), model.LoadOptions{})
}

// TestTensorParallelMatchesUnsharded: a model sharded over 2 or 4 ranks
// (kv heads replicated at 4: the fixtures have 2) gives the unsharded
// model's logits within 1e-4 of their largest, over a prefill of the
// reference prompt and decode steps through the KV cache, and the same
// greedy ids, read back each step and pipelined.
func TestTensorParallelMatchesUnsharded(t *testing.T) {
	for _, c := range []struct {
		fixture string
		ranks   []int
	}{
		{"tiny/llama-bf16", []int{2, 4}},
		{"tiny/qwen2-bf16", []int{2, 4}}, // q/k/v biases, tied embeddings
		{"tiny/qwen3-bf16", []int{2, 4}}, // per-head q/k norms
		{"tiny/qwen2_yarn-bf16", []int{2}},
		{"tiny/qwen3-mlx-q4g64", []int{2}},     // o_proj and down_proj keep whole groups of 64 at 2
		{"tiny/qwen3_moe-bf16", []int{2, 4}},   // expert parallel: 8 experts, 4 or 2 a rank (HF per-expert tensors)
		{"tiny/mixtral-bf16", []int{2, 4}},     // block_sparse_moe, w1/w3/w2; 1 expert a rank at 4
		{"tiny/gemma3_text-bf16", []int{2, 4}}, // 1+w norms read on the host, sandwich norms, tied head
		{"tiny/gemma4-bf16", []int{2, 4}},      // k_eq_v full layer of head dim 32 and 1 kv head (replicated), softcap
		{"tiny/gpt_oss-bf16", []int{2, 4}},     // sinks split with the heads, biased router and fused experts by expert
		{"tiny/qwen3_5_text-bf16", []int{2}},   // Gated DeltaNet by key/value heads (q|k|v conv channels, per-rank state), gated q_proj
	} {
		dir := testdata + c.fixture
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("fixture missing (the shared checkout is needed): %v", err)
		}
		ref, err := modeltest.LoadReference(dir)
		if err != nil {
			t.Fatal(err)
		}
		checkTPMatches(t, c.fixture, dir, ref.InputIDs[:min(len(ref.InputIDs), 24)], c.ranks)
	}
}

// checkTPMatches loads dir unsharded and over each of ranks, and compares
// their logits over feedAll's steps (within 1e-4 normalised) and their
// greedy ids, read back and pipelined.
func checkTPMatches(t *testing.T, name, dir string, prompt []int32, ranks []int) {
	t.Helper()
	one, err := model.Load(dir, cpu.New(1), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := feedAll(t, one, prompt)
	wantIDs, err := modeltest.Greedy(one, prompt, 8, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ranks {
		t.Run(fmt.Sprintf("%s/tp%d", name, n), func(t *testing.T) {
			m, err := loadTP(dir, n)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Backend().Close()
			got := feedAll(t, m, prompt)
			if d := modeltest.RelDiff(got, want); d > 1e-4 {
				t.Errorf("logits differ from the unsharded model's by %.2e (normalised)", d)
			} else {
				t.Logf("logits within %.2e", d)
			}
			for _, pipelined := range []bool{false, true} {
				ids, err := modeltest.Greedy(m, prompt, 8, pipelined)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids, wantIDs) {
					t.Errorf("greedy (pipelined %v) %v, unsharded %v", pipelined, ids, wantIDs)
				}
			}
		})
	}
}

// feedAll prefills all but the last 4 tokens of prompt in one step and
// decodes those 4 one at a time, returning every step's logits.
func feedAll(t *testing.T, m *model.Model, prompt []int32) []float32 {
	t.Helper()
	s, err := modeltest.NewSeq(m, len(prompt))
	if err != nil {
		t.Fatal(err)
	}
	split := len(prompt) - 4
	out, err := s.Feed(prompt[:split], true)
	if err != nil {
		t.Fatal(err)
	}
	for i := split; i < len(prompt); i++ {
		l, err := s.Feed(prompt[i:i+1], false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l...)
	}
	if len(out) != len(prompt)*m.Vocab() {
		t.Fatalf("%d logits for %d tokens of a %d vocabulary", len(out), len(prompt), m.Vocab())
	}
	return out
}

// TestTensorParallelRefuses: a split that would cut a quantization
// group, or a family the plan does not know, is refused at load, naming
// the reason.
func TestTensorParallelRefuses(t *testing.T) {
	for _, c := range []struct {
		fixture string
		n       int
		want    []string
	}{
		// 4 heads of 16 are 32 of o_proj's input columns a rank: half a group of 64.
		{"tiny/llama-mlx-q4g64", 2, []string{"model.layers.0.self_attn.o_proj", "groups of 64"}},
		{"tiny/qwen3-mlx-q4g64", 4, []string{"model.layers.0.self_attn.o_proj", "groups of 64"}},
		{"tiny/llama-bf16", 8, []string{"4 attention heads do not split over 8 ranks"}},
		{"tiny/gpt_oss-mlx-mxfp4-q8g64", 2, []string{"mxfp4-quantized weights"}},
		{"tiny/gemma4_e-bf16", 2, []string{"per-layer inputs", "do not split yet"}},
		{"tiny/gemma4_moe-bf16", 2, []string{"not implemented for gemma4"}},
		{"tiny/qwen3_5_text-bf16", 4, []string{"linear attention's 2 key and 4 value heads do not both split over 4 ranks"}},
		{"tiny/qwen3_5_text-mlx-q4g64", 2, []string{"linear_attn.out_proj", "groups of 64"}},
	} {
		t.Run(fmt.Sprintf("%s/tp%d", c.fixture, c.n), func(t *testing.T) {
			if _, err := os.Stat(testdata + c.fixture); err != nil {
				t.Fatalf("fixture missing (the shared checkout is needed): %v", err)
			}
			_, err := loadTP(testdata+c.fixture, c.n)
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("err %v, want one saying %q", err, w)
				}
			}
		})
	}
}
