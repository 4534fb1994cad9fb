package model_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/modeltest"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// The fixtures of issue 7: routed experts (HF per-expert and MLX stacked
// naming) and Gemma 4's hybrid sliding/full attention. T=40 exceeds the
// Gemma window of 8, so the window is exercised in all three checks.
var moeGemmaFixtures = []string{
	"tiny/qwen3_moe-bf16", "tiny/qwen3_moe-mlx-q4g64",
	"tiny/mixtral-bf16", "tiny/mixtral-mlx-q4g64",
	"tiny/gemma4-bf16", "tiny/gemma4-mlx-q4g64",
}

func TestReferenceLogitsMoEGemmaCPU(t *testing.T) {
	for _, f := range moeGemmaFixtures {
		t.Run(f, func(t *testing.T) {
			r := modeltest.Check(t, testdata+f, cpu.New(0), modeltest.Options{RelTol: 1e-3, NearTie: 1e-3, Prefix: 17})
			t.Logf("%s: full %.2e incremental %.2e greedy steps checked %d", f, r.FullRel, r.IncrRel, r.GreedyChecked)
		})
	}
}

// recordingSource hands out zero weights of whatever shape is asked for
// and records the names, so a test can see which blocks a family built.
type recordingSource struct {
	be    backend.Backend
	asked []string
}

func (r *recordingSource) Has(name string) bool {
	// MLX naming (stacked experts) and the optional q/k norms exist;
	// biases and lm_head do not.
	return strings.Contains(name, "switch_mlp") || strings.HasSuffix(name, "_norm.weight")
}

func (r *recordingSource) Linear(module string, shape ...int) (backend.Weight, error) {
	return r.Dense(module+".weight", shape...)
}

func (r *recordingSource) Dense(name string, shape ...int) (backend.Weight, error) {
	r.asked = append(r.asked, name)
	n := 1
	for _, d := range shape {
		n *= d
	}
	return r.be.UploadWeight(&tensor.Host{Name: name, Shape: shape, DType: tensor.F32, Data: make([]byte, 4*n)})
}

// transformers' Qwen3-MoE rule: layer i is sparse iff it is not in
// mlp_only_layers and (i+1) % decoder_sparse_step == 0.
func TestQwen3MoESparseLayers(t *testing.T) {
	cfg, err := weights.ParseConfig([]byte(`{"model_type":"qwen3_moe","hidden_size":64,"intermediate_size":96,
		"num_hidden_layers":6,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":32,
		"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32,"norm_topk_prob":true,
		"decoder_sparse_step":2,"mlp_only_layers":[3]}`))
	if err != nil {
		t.Fatal(err)
	}
	src := &recordingSource{be: cpu.New(1)}
	if _, err := model.Build(cfg, src, src.be); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Layers {
		moe := slices.Contains(src.asked, fmt.Sprintf("model.layers.%d.mlp.switch_mlp.up_proj.weight", i))
		dense := slices.Contains(src.asked, fmt.Sprintf("model.layers.%d.mlp.up_proj.weight", i))
		if want := i == 1 || i == 5; moe != want || dense == want {
			t.Errorf("layer %d: moe %v dense %v, want moe %v", i, moe, dense, want)
		}
	}
}

func TestGemma4RefusesUnsupported(t *testing.T) {
	base := `"model_type":"gemma4_text","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":32`
	for _, tc := range []struct{ extra, want string }{
		{`"use_bidirectional_attention":"all"`, "bidirectional"},
		// Two layers (sliding, full): the shared full layer has no
		// earlier full layer to read.
		{`"num_kv_shared_layers":1`, "no earlier layer of its type"},
	} {
		cfg, err := weights.ParseConfig([]byte("{" + base + "," + tc.extra + "}"))
		if err != nil {
			t.Fatal(err)
		}
		src := &recordingSource{be: cpu.New(1)}
		if _, err := model.Build(cfg, src, src.be); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v", tc.extra, err)
		}
	}
}

// layer_scalar multiplies the whole residual stream after the layer (not
// just the layer's branch): scaling the last layer's leaves the logits
// unchanged, because the final RMSNorm is scale-invariant, while scaling
// an earlier layer's changes them. The fixture's scalars are all 1, so the
// check patches copies of it.
func TestGemma4LayerScalar(t *testing.T) {
	dir := testdata + "tiny/gemma4-bf16"
	ref, err := modeltest.LoadReference(dir)
	if err != nil {
		t.Fatal(err)
	}
	logits := func(layer int, v float32) []float32 {
		d := patchScalar(t, dir, fmt.Sprintf("model.layers.%d.layer_scalar", layer), v)
		m, err := model.Load(d, cpu.New(0), model.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := modeltest.NewSeq(m, len(ref.InputIDs))
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Feed(ref.InputIDs, true)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if d := modeltest.RelDiff(logits(5, 4), ref.Logits); d > 1e-5 {
		t.Errorf("last layer_scalar 4: logits moved by %.2g, want unchanged", d)
	}
	if d := modeltest.RelDiff(logits(0, 0.5), ref.Logits); d < 1e-2 {
		t.Errorf("first layer_scalar 0.5: logits moved by only %.2g", d)
	}
}

// patchScalar copies the fixture in dir to a temp dir with the bf16 scalar
// tensor name set to v.
func patchScalar(t *testing.T, dir, name string, v float32) string {
	t.Helper()
	return copyFixture(t, dir, nil, func(b []byte) {
		infos, start, _, err := weights.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(infos, func(ti weights.TensorInfo) bool { return ti.Name == name })
		if i < 0 || infos[i].DType != tensor.BF16 {
			t.Fatalf("%s: no bf16 %s", dir, name)
		}
		binary.LittleEndian.PutUint16(b[start+infos[i].Begin:], tensor.F32ToBF16(v))
	})
}

// copyFixture copies dir's config.json and model.safetensors to a temp
// dir, letting editConfig change the config and patch the weights.
func copyFixture(t *testing.T, dir string, editConfig func(map[string]any), patch func([]byte)) string {
	t.Helper()
	out := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if patch != nil {
		patch(b)
	}
	cb, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if editConfig != nil {
		var c map[string]any
		if err := json.Unmarshal(cb, &c); err != nil {
			t.Fatal(err)
		}
		editConfig(c)
		if cb, err = json.Marshal(c); err != nil {
			t.Fatal(err)
		}
	}
	if os.WriteFile(filepath.Join(out, "config.json"), cb, 0o644) != nil || os.WriteFile(filepath.Join(out, "model.safetensors"), b, 0o644) != nil {
		t.Fatal("writing the patched fixture")
	}
	return out
}

// Mixtral applies config.sliding_window to every layer when it is set:
// with a window of 8, the first 8 positions keep the reference logits
// (the window covers their whole prefix) and later ones move.
func TestMixtralSlidingWindow(t *testing.T) {
	dir := testdata + "tiny/mixtral-bf16"
	ref, err := modeltest.LoadReference(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := copyFixture(t, dir, func(c map[string]any) { c["sliding_window"] = 8 }, nil)
	m, err := model.Load(d, cpu.New(0), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
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
	if d := modeltest.RelDiff(got[:8*V], ref.Logits[:8*V]); d > 1e-5 {
		t.Errorf("positions < window moved by %.2g", d)
	}
	for pos := 8; pos < len(ref.InputIDs); pos++ {
		if d := modeltest.RelDiff(got[pos*V:(pos+1)*V], ref.Logits[pos*V:(pos+1)*V]); d < 1e-4 {
			t.Errorf("position %d unchanged (%.2g) with a window of 8", pos, d)
		}
	}
}
