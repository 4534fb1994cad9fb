package model_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// Only the checkpoint's own files are read: a consolidated.safetensors
// (Mistral repos ship one with the same weights under other names) and
// reference outputs beside model.safetensors change nothing; a folder
// with no model*.safetensors fails naming what it found.
func TestLoadsOnlyCheckpointFiles(t *testing.T) {
	dir := testdata + "tiny/llama-bf16"
	ref, err := modeltest.LoadReference(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := copyFixture(t, dir, nil, nil)
	writeTensors(t, filepath.Join(d, "consolidated.safetensors"), map[string]stTensor{
		"layers.0.attention.wq.weight": bf16Const(1, 64, 64), "model.norm.weight": bf16Const(7, 64)})
	writeTensors(t, filepath.Join(d, "reference.safetensors"), map[string]stTensor{"logits": bf16Const(0, 4, 4)})
	if diff := modeltest.RelDiff(logitsOf(t, d, ref.InputIDs), ref.Logits); diff > 1e-3 {
		t.Errorf("logits off by %.3g with extra safetensors in the folder", diff)
	}
	if err := os.Remove(filepath.Join(d, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	_, err = model.Load(d, cpu.New(0), model.LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "model*.safetensors") || !strings.Contains(err.Error(), "consolidated.safetensors") {
		t.Errorf("no model*.safetensors: got %v", err)
	}
}

// A tensor no block reads fails the load naming it; vision towers and
// saved rotary frequencies are known leftovers.
func TestUnusedTensorsFail(t *testing.T) {
	dir := testdata + "tiny/llama-bf16"
	extra := rewriteFixture(t, dir, nil, func(ts map[string]stTensor) {
		ts["model.layers.1.mlp.extra_proj.weight"] = bf16Const(0, 4, 64)
	})
	_, err := model.Load(extra, cpu.New(0), model.LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "model.layers.1.mlp.extra_proj.weight") {
		t.Errorf("unused tensor: got %v", err)
	}
	known := rewriteFixture(t, dir, nil, func(ts map[string]stTensor) {
		ts["model.layers.0.self_attn.rotary_emb.inv_freq"] = stTensor{tensor.F32, []int{8}, make([]byte, 32)}
		ts["vision_tower.encoder.layers.0.weight"] = bf16Const(0, 4)
	})
	if _, err := model.Load(known, cpu.New(0), model.LoadOptions{}); err != nil {
		t.Errorf("known leftovers: %v", err)
	}
}

// o_proj.bias is loaded and applied: since each softmax row sums to 1, a
// v_proj bias b adds b to every head's attention output, so replacing
// Qwen2's v bias by the o_proj bias W_o·b (b expanded over the query
// heads of each KV head) must give the reference logits exactly.
func TestOProjBias(t *testing.T) {
	dir := testdata + "tiny/qwen2-bf16"
	ref, err := modeltest.LoadReference(dir)
	if err != nil {
		t.Fatal(err)
	}
	const heads, kvHeads, hd, hidden = 4, 2, 16, 64
	d := rewriteFixture(t, dir, nil, func(ts map[string]stTensor) {
		for _, l := range []string{"0", "2"} {
			pre := "model.layers." + l + ".self_attn."
			b := floats(ts[pre+"v_proj.bias"])
			wo := floats(ts[pre+"o_proj.weight"])
			if len(b) != kvHeads*hd || len(wo) != hidden*heads*hd {
				t.Fatalf("fixture geometry changed: v bias %d, o_proj %d", len(b), len(wo))
			}
			ob := make([]float32, hidden)
			for r := range hidden {
				var s float64
				for h := range heads {
					for j := range hd {
						s += float64(wo[r*heads*hd+h*hd+j]) * float64(b[h/(heads/kvHeads)*hd+j])
					}
				}
				ob[r] = float32(s)
			}
			ts[pre+"o_proj.bias"] = f32Tensor(ob)
			ts[pre+"v_proj.bias"] = bf16Const(0, kvHeads*hd)
		}
	})
	if diff := modeltest.RelDiff(logitsOf(t, d, ref.InputIDs), ref.Logits); diff > 1e-4 {
		t.Errorf("v bias moved into o_proj.bias: logits off by %.3g", diff)
	}
}

// MLP biases (Llama's mlp_bias) are loaded and applied: zero biases keep
// the reference logits, non-zero ones on each projection move them.
func TestMLPBiases(t *testing.T) {
	dir := testdata + "tiny/llama-bf16"
	ref, err := modeltest.LoadReference(dir)
	if err != nil {
		t.Fatal(err)
	}
	withBias := func(proj string, v float32) string {
		return rewriteFixture(t, dir, func(c map[string]any) { c["mlp_bias"] = true }, func(ts map[string]stTensor) {
			for _, l := range []string{"0", "1", "2"} {
				for _, p := range []string{"gate_proj", "up_proj", "down_proj"} {
					n := ts["model.layers."+l+".mlp."+p+".weight"].Shape[0]
					val := float32(0)
					if p == proj {
						val = v
					}
					ts["model.layers."+l+".mlp."+p+".bias"] = bf16Const(val, n)
				}
			}
		})
	}
	if diff := modeltest.RelDiff(logitsOf(t, withBias("", 0), ref.InputIDs), ref.Logits); diff > 1e-5 {
		t.Errorf("zero MLP biases: logits off by %.3g", diff)
	}
	for _, p := range []string{"gate_proj", "up_proj", "down_proj"} {
		if diff := modeltest.RelDiff(logitsOf(t, withBias(p, 0.5), ref.InputIDs), ref.Logits); diff < 1e-3 {
			t.Errorf("%s.bias 0.5: logits moved by only %.3g", p, diff)
		}
	}
}

// tie_word_embeddings false needs an lm_head; true ignores a stored one.
func TestTiedEmbeddings(t *testing.T) {
	untied := copyFixture(t, testdata+"tiny/qwen2-bf16", func(c map[string]any) { c["tie_word_embeddings"] = false }, nil)
	if _, err := model.Load(untied, cpu.New(0), model.LoadOptions{}); err == nil || !strings.Contains(err.Error(), "lm_head") {
		t.Errorf("untied without lm_head: got %v", err)
	}
	tied := copyFixture(t, testdata+"tiny/llama-bf16", func(c map[string]any) { c["tie_word_embeddings"] = true }, nil)
	m, err := model.Load(tied, cpu.New(0), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.LMHead != m.Embed {
		t.Error("tie_word_embeddings true: the head is not the embedding")
	}
}

// "gelu" is the exact erf GELU, not the tanh form Gemma uses: the same
// weights under "gelu" give other logits. The two forms differ by under
// 1e-3 of a unit on this model's small activations, so the logits move by
// a few 1e-5, far above the 2e-7 the fixture matches to (the CPU
// backend's test checks the erf values themselves).
func TestGELUConfig(t *testing.T) {
	dir := testdata + "tiny/gemma3_text-bf16"
	ref, err := modeltest.LoadReference(dir)
	if err != nil {
		t.Fatal(err)
	}
	erf := copyFixture(t, dir, func(c map[string]any) { c["hidden_activation"] = "gelu" }, nil)
	if diff := modeltest.RelDiff(logitsOf(t, erf, ref.InputIDs), ref.Logits); diff < 5e-6 {
		t.Errorf("gelu (erf) gives the gelu_pytorch_tanh logits (off by only %.3g)", diff)
	}
}

// Mistral's sliding_window applies to every layer when the config has no
// layer_types; layer_types choose per layer (Qwen2's form). With a window
// of 8, positions below 8 keep the reference logits and later ones move
// (only the windowed layers see fewer keys).
func TestLlamaSlidingWindows(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		edit func(map[string]any)
	}{
		{"tiny/llama-bf16", func(c map[string]any) { c["model_type"], c["sliding_window"] = "mistral", 8 }},
		{"tiny/qwen2-bf16", func(c map[string]any) {
			c["sliding_window"], c["layer_types"] = 8, []string{"sliding_attention", "full_attention", "sliding_attention"}
		}},
	} {
		ref, err := modeltest.LoadReference(testdata + tc.dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(copyFixture(t, testdata+tc.dir, tc.edit, nil), cpu.New(0), model.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		windows := 0
		for _, l := range m.KVLayers() {
			if l.Window == 8 {
				windows++
			}
		}
		if want := map[string]int{"tiny/llama-bf16": 3, "tiny/qwen2-bf16": 2}[tc.dir]; windows != want {
			t.Errorf("%s: %d windowed layers, want %d", tc.dir, windows, want)
		}
		s, err := modeltest.NewSeq(m, len(ref.InputIDs))
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Feed(ref.InputIDs, true)
		if err != nil {
			t.Fatal(err)
		}
		V := ref.Vocab
		if diff := modeltest.RelDiff(got[:8*V], ref.Logits[:8*V]); diff > 1e-5 {
			t.Errorf("%s: positions < window moved by %.2g", tc.dir, diff)
		}
		if diff := modeltest.RelDiff(got[20*V:21*V], ref.Logits[20*V:21*V]); diff < 1e-4 {
			t.Errorf("%s: position 20 unchanged (%.2g) with a window of 8", tc.dir, diff)
		}
	}
}

func floats(x stTensor) []float32 {
	out := make([]float32, len(x.Data)/2)
	for i := range out {
		out[i] = tensor.BF16ToF32(binary.LittleEndian.Uint16(x.Data[2*i:]))
	}
	return out
}

func f32Tensor(v []float32) stTensor {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return stTensor{tensor.F32, []int{len(v)}, b}
}

// A yarn block added to a Qwen config that keeps max_position_embeddings
// at the original length serves factor x original tokens.
func TestYarnMaxContext(t *testing.T) {
	d := copyFixture(t, testdata+"tiny/qwen2_yarn-bf16", func(c map[string]any) { c["max_position_embeddings"] = 64 }, nil)
	m, err := model.Load(d, cpu.New(0), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.MaxContext(); got != 256 {
		t.Errorf("MaxContext %d, want 4 x 64", got)
	}
	ref, err := modeltest.LoadReference(testdata + "tiny/qwen2_yarn-bf16")
	if err != nil {
		t.Fatal(err)
	}
	// The frequencies do not depend on max_position_embeddings.
	if diff := modeltest.RelDiff(logitsOf(t, d, ref.InputIDs), ref.Logits); diff > 1e-3 {
		t.Errorf("logits off by %.3g", diff)
	}
}
