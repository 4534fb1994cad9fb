package weights

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// The mlx-lm gpt-oss fixture mixes per-module modes: experts mxfp4 (the
// default), attention/embeddings affine 8-bit, routers affine without a
// mode key.
func TestFPModesFixture(t *testing.T) {
	dir := testdata + "tiny/gpt_oss-mlx-mxfp4-q8g64"
	cfg, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.Quant.Default; d == nil || *d != (QuantSpec{4, 32, quant.MXFP4}) {
		t.Fatalf("default %+v", d)
	}
	if s, _ := cfg.Quant.For("model.layers.1.mlp.router"); s != (QuantSpec{8, 64, quant.Affine}) {
		t.Fatalf("router %+v", s)
	}
	ck, err := Open(dir, cfg.Quant)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	h, err := ck.Linear("model.layers.0.mlp.experts.gate_proj", 4, 96, 64)
	if err != nil {
		t.Fatal(err)
	}
	if q := h.Quant; q == nil || q.Mode != quant.MXFP4 || q.Bits != 4 || q.GroupSize != 32 || q.ScaleDType != tensor.U8 ||
		q.Biases != nil || len(q.Scales) != 4*96*2 || len(h.Data) != 4*96*32 {
		t.Fatalf("experts: %+v", h.Quant)
	}
	h, err = ck.Linear("model.layers.0.self_attn.q_proj", 64, 64)
	if err != nil || h.Quant.Mode != "" && h.Quant.Mode != quant.Affine || h.Quant.Bits != 8 {
		t.Fatalf("q_proj: %v %+v", err, h.Quant)
	}
	// With no config entry the mode is inferred from uint8 scales.
	silent := QuantConfig{Overrides: map[string]*QuantSpec{}}
	ck2, err := Open(dir, silent)
	if err != nil {
		t.Fatal(err)
	}
	defer ck2.Close()
	if h, err := ck2.Linear("model.layers.2.mlp.experts.down_proj", 4, 64, 96); err != nil || h.Quant.Mode != quant.MXFP4 {
		t.Fatalf("inferred: %v", err)
	}
}

func TestOpenAIMXFP4Fixture(t *testing.T) {
	dir := testdata + "tiny/gpt_oss-mxfp4"
	cfg, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Quant.Method != "mxfp4" || cfg.Quant.Default != nil {
		t.Fatalf("quant %+v", cfg.Quant)
	}
	ck, err := Open(dir, cfg.Quant)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	h, err := ck.MXFP4Blocks("model.layers.3.mlp.experts.gate_up_proj", 4, 192, 64)
	if err != nil {
		t.Fatal(err)
	}
	g, err := SplitRows(h, 0)
	if err != nil || g.Shape[1] != 96 || len(g.Data) != 4*96*32 || len(g.Quant.Scales) != 4*96*2 {
		t.Fatalf("split: %v %v", err, g.Shape)
	}
	// Row 1 of expert 2's gate is row 2 of its gate_up.
	if string(g.Data[(2*96+1)*32:(2*96+2)*32]) != string(h.Data[(2*192+2)*32:(2*192+3)*32]) {
		t.Fatal("SplitRows picked the wrong row")
	}
	if _, err := ck.MXFP4Blocks("model.layers.3.mlp.experts.gate_up_proj", 4, 192, 96); err == nil ||
		!strings.Contains(err.Error(), "model.safetensors") || !strings.Contains(err.Error(), "gate_up_proj_blocks") {
		t.Fatalf("wrong shape: %v", err)
	}
}

// Broken fp-quantized files fail with one line naming file and tensor.
func TestFPCheckpointErrors(t *testing.T) {
	u32 := func(shape ...int) map[string]any { return map[string]any{"dtype": "U32", "shape": shape} }
	cases := []struct {
		name    string
		tensors map[string]map[string]any
		mode    string
		want    []string
	}{
		{"bf16 scales", map[string]map[string]any{"m.weight": u32(2, 4), "m.scales": {"dtype": "BF16", "shape": []int{2, 1}}}, quant.MXFP4,
			[]string{"m.scales", "U8"}},
		{"biases present", map[string]map[string]any{"m.weight": u32(2, 4), "m.scales": {"dtype": "U8", "shape": []int{2, 1}},
			"m.biases": {"dtype": "BF16", "shape": []int{2, 1}}}, quant.MXFP4, []string{"m.biases", "no biases"}},
		{"group", map[string]map[string]any{"m.weight": u32(2, 4), "m.scales": {"dtype": "U8", "shape": []int{2, 1}}}, quant.NVFP4,
			[]string{"tensor m.weight", "scales"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			hdr, off := map[string]any{}, 0
			for name, v := range tc.tensors {
				n := 1
				for _, x := range v["shape"].([]int) {
					n *= x
				}
				dt, _ := tensor.ParseDType(v["dtype"].(string))
				n *= dt.Size()
				hdr[name] = map[string]any{"dtype": v["dtype"], "shape": v["shape"], "data_offsets": []int{off, off + n}}
				off += n
			}
			writeST(t, filepath.Join(d, "model.safetensors"), hdr, make([]byte, off))
			bits, group, _ := quant.FPParams(tc.mode)
			c, err := Open(d, QuantConfig{Default: &QuantSpec{bits, group, tc.mode}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Linear("m", 2, 32)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, "model.safetensors") {
				t.Errorf("error %q: want one line naming model.safetensors", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
	for _, cfg := range []string{`{"quantization":{"mode":"nvfp4","bits":4,"group_size":32}}`, `{"quantization":{"mode":"fp3","bits":4,"group_size":32}}`,
		`{"quantization_config":{"quant_method":"gptq"}}`} {
		if _, err := ParseConfig([]byte(cfg)); err == nil {
			t.Errorf("%s accepted", cfg)
		}
	}
}
