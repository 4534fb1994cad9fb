package model_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

// Gemma 3: five sliding layers (window 8, rope base 1e4) then a global
// one (1e6); T=40 exceeds the window in all three checks.
func TestReferenceLogitsGemma3CPU(t *testing.T) {
	for _, f := range []string{"tiny/gemma3_text-bf16", "tiny/gemma3_text-mlx-q4g64"} {
		t.Run(f, func(t *testing.T) {
			r := modeltest.Check(t, testdata+f, cpu.New(0), modeltest.Options{RelTol: 1e-3, NearTie: 1e-3, Prefix: 17})
			t.Logf("%s: full %.2e incremental %.2e greedy steps checked %d", f, r.FullRel, r.IncrRel, r.GreedyChecked)
		})
	}
}

// logitsOf loads dir and returns the full-sequence logits of ids.
func logitsOf(t *testing.T, dir string, ids []int32) []float32 {
	t.Helper()
	m, err := model.Load(dir, cpu.New(0), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := modeltest.NewSeq(m, len(ids))
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Feed(ids, true)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The configs released Gemma 3 checkpoints carry: transformers 4's keys
// (rope_theta, rope_local_base_freq, sliding_window_pattern, no
// layer_types) and the multimodal wrapper (model_type gemma3, a sparse
// text_config relying on Gemma3TextConfig's defaults, weights under
// language_model.model.*, a vision tower beside them). Both must give the
// reference logits of the same weights.
func TestGemma3ConfigForms(t *testing.T) {
	dir := testdata + "tiny/gemma3_text-bf16"
	ref, err := modeltest.LoadReference(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := func(c map[string]any) {
		delete(c, "layer_types")
		delete(c, "rope_parameters")
		delete(c, "_sliding_window_pattern")
		c["sliding_window_pattern"], c["rope_theta"], c["rope_local_base_freq"] = 6, 1e6, 1e4
	}
	if d := modeltest.RelDiff(logitsOf(t, copyFixture(t, dir, old, nil), ref.InputIDs), ref.Logits); d > 1e-3 {
		t.Errorf("transformers 4 config: logits off by %.3g", d)
	}
	wrapped := func(c map[string]any) {
		old(c)
		text := map[string]any{"model_type": "gemma3_text"}
		for _, k := range []string{"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
			"num_key_value_heads", "head_dim", "vocab_size", "sliding_window", "query_pre_attn_scalar", "rope_theta",
			"rope_local_base_freq", "sliding_window_pattern"} {
			text[k] = c[k]
		}
		for k := range c {
			delete(c, k)
		}
		c["model_type"], c["text_config"], c["architectures"] = "gemma3", text, []string{"Gemma3ForConditionalGeneration"}
		c["vision_config"] = map[string]any{"model_type": "siglip_vision_model"}
	}
	mm := rewriteFixture(t, dir, wrapped, func(ts map[string]stTensor) {
		for _, n := range slices.Collect(maps.Keys(ts)) {
			ts["language_model."+n] = ts[n]
			delete(ts, n)
		}
		ts["vision_tower.vision_model.post_layernorm.weight"] = bf16Const(1, 8)
		ts["multi_modal_projector.mm_soft_emb_norm.weight"] = bf16Const(1, 8)
	})
	if d := modeltest.RelDiff(logitsOf(t, mm, ref.InputIDs), ref.Logits); d > 1e-3 {
		t.Errorf("multimodal wrapper: logits off by %.3g", d)
	}
}
