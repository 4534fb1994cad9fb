package weights

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

const testdata = "../../../shared/testdata/"

// writeST writes a safetensors file from a header and data section.
func writeST(t testing.TB, path string, header map[string]any, data []byte) {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	b = append(append(b, h...), data...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOpenQuantizedFixture(t *testing.T) {
	cfg, err := LoadConfig(testdata + "tiny/qwen3_moe-mlx-q4g64")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumExperts != 8 || cfg.TopK != 2 || cfg.MoEIntermediate != 32 || !cfg.NormTopKProb {
		t.Fatalf("moe fields: %+v", cfg)
	}
	ck, err := Open(testdata+"tiny/qwen3_moe-mlx-q4g64", cfg.Quant)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	h, err := ck.Linear("model.layers.0.mlp.gate", 8, 64)
	if err != nil {
		t.Fatal(err)
	}
	if h.Quant == nil || h.Quant.Bits != 8 || h.Quant.GroupSize != 64 || h.Quant.ScaleDType != tensor.BF16 {
		t.Fatalf("router should be 8-bit group 64 bf16, got %+v", h.Quant)
	}
	h, err = ck.Linear("model.layers.0.mlp.switch_mlp.up_proj", 8, 32, 64)
	if err != nil {
		t.Fatal(err)
	}
	if h.Quant.Bits != 4 || len(h.Data) != 8*32*64/2 {
		t.Fatalf("experts: bits %d, %d bytes", h.Quant.Bits, len(h.Data))
	}
	// down_proj has in=32, not a multiple of 64: left unquantized.
	h, err = ck.Linear("model.layers.0.mlp.switch_mlp.down_proj", 8, 64, 32)
	if err != nil || h.Quant != nil || h.DType != tensor.BF16 {
		t.Fatalf("down_proj should be dense bf16: %v %+v", err, h)
	}
}

func TestMultimodalNamesAndTextConfig(t *testing.T) {
	dir := testdata + "tiny/gemma4-mlx-q4g64"
	cfg, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hidden != 64 || cfg.Layers != 6 || cfg.SlidingWindow != 8 || cfg.FinalLogitSoftcap != 30 ||
		!cfg.AttentionKEqV || cfg.PerLayer[5].HeadDim != 32 || cfg.PerLayer[5].KVHeads != 1 ||
		len(cfg.LayerTypes) != 6 || cfg.RopeByLayerType["full_attention"].PartialRotaryFactor != 0.25 {
		t.Fatalf("gemma4 text_config not parsed: %+v", cfg)
	}
	ck, err := Open(dir, cfg.Quant)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if !ck.Has("model.layers.5.self_attn.q_proj.weight") || !ck.Has("model.embed_tokens.scales") {
		t.Fatalf("language_model.model.* not canonicalised: %v", ck.Names()[:5])
	}
}

func TestRopeVariants(t *testing.T) {
	cfg, err := LoadConfig(testdata + "tiny/llama-bf16")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Rope
	if r.Type != "llama3" || r.Factor != 8 || r.OriginalMaxPosition != 64 || r.Theta != 500000 || r.HighFreqFactor != 4 {
		t.Fatalf("llama3 rope: %+v", r)
	}
	c, err := ParseConfig([]byte(`{"model_type":"llama","rope_theta":1000,"rope_scaling":{"type":"linear","factor":2}}`))
	if err != nil || c.Rope.Type != "linear" || c.Rope.Factor != 2 || c.Rope.Theta != 1000 {
		t.Fatalf("linear rope: %v %+v", err, c.Rope)
	}
	if _, err := ParseConfig([]byte(`{"rope_scaling":{"rope_type":"su","factor":2}}`)); err == nil || !strings.Contains(err.Error(), `"su"`) {
		t.Fatalf("unsupported rope type should be named: %v", err)
	}
}

func TestQuantOverrides(t *testing.T) {
	c, err := ParseConfig([]byte(`{"quantization":{"group_size":32,"bits":6,"a.b":{"group_size":128,"bits":3},"c":false,"d":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		module string
		spec   QuantSpec
		ok     bool
	}{{"x", QuantSpec{6, 32, "affine"}, true}, {"a.b", QuantSpec{3, 128, "affine"}, true}, {"c", QuantSpec{}, false}, {"d", QuantSpec{6, 32, "affine"}, true}} {
		s, ok := c.Quant.For(tc.module)
		if s != tc.spec || ok != tc.ok {
			t.Errorf("%s: got %+v %v", tc.module, s, ok)
		}
	}
	if _, err := ParseConfig([]byte(`{"quantization":{"group_size":64,"bits":7}}`)); err == nil {
		t.Fatal("7 bits accepted")
	}
}

// Every broken-checkpoint error is one line naming the file and tensor.
func TestCheckpointErrors(t *testing.T) {
	dir := t.TempDir()
	good := func() map[string]any {
		return map[string]any{"w": map[string]any{"dtype": "F32", "shape": []int{2, 2}, "data_offsets": []int{0, 16}}}
	}
	cases := []struct {
		name   string
		header map[string]any
		data   []byte
		op     func(c *Checkpoint) error
		want   []string
	}{
		{"missing tensor", good(), make([]byte, 16), func(c *Checkpoint) error { _, err := c.Dense("nope", 2); return err },
			[]string{"model.safetensors", "nope", "missing"}},
		{"wrong shape", good(), make([]byte, 16), func(c *Checkpoint) error { _, err := c.Dense("w", 4, 2); return err },
			[]string{"model.safetensors", "tensor w", "[2 2]", "[4 2]"}},
		{"unknown dtype", map[string]any{"w": map[string]any{"dtype": "F8_E9", "shape": []int{2}, "data_offsets": []int{0, 2}}},
			make([]byte, 2), nil, []string{"model.safetensors", "tensor w", "F8_E9"}},
		{"truncated", good(), make([]byte, 10), nil, []string{"model.safetensors", "tensor w", "truncated"}},
		{"size mismatch", map[string]any{"w": map[string]any{"dtype": "F32", "shape": []int{3}, "data_offsets": []int{0, 16}}},
			make([]byte, 16), nil, []string{"tensor w", "needs 12 bytes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			os.MkdirAll(d, 0o755)
			writeST(t, filepath.Join(d, "model.safetensors"), tc.header, tc.data)
			c, err := Open(d, QuantConfig{})
			if err == nil && tc.op != nil {
				err = tc.op(c)
			}
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("multi-line error: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
	// Garbage instead of a header.
	d := filepath.Join(dir, "garbage")
	os.MkdirAll(d, 0o755)
	os.WriteFile(filepath.Join(d, "model.safetensors"), []byte("this is not a safetensors file at all"), 0o644)
	if _, err := Open(d, QuantConfig{}); err == nil || !strings.Contains(err.Error(), "model.safetensors") {
		t.Fatalf("garbage file: %v", err)
	}
}

func TestShardedIndex(t *testing.T) {
	d := t.TempDir()
	writeST(t, filepath.Join(d, "a.safetensors"), map[string]any{"x": map[string]any{"dtype": "BF16", "shape": []int{2}, "data_offsets": []int{0, 4}}}, []byte{0x80, 0x3f, 0, 0x40})
	writeST(t, filepath.Join(d, "b.safetensors"), map[string]any{"y": map[string]any{"dtype": "F16", "shape": []int{1}, "data_offsets": []int{0, 2}}}, []byte{0, 0x3c})
	os.WriteFile(filepath.Join(d, "model.safetensors.index.json"), []byte(`{"weight_map":{"x":"a.safetensors","y":"b.safetensors"}}`), 0o644)
	c, err := Open(d, QuantConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	x, err := c.Dense("x", 2)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, 2)
	tensor.ToFloat32(v, x.Data, x.DType)
	y, _ := c.Dense("y", 1)
	w := make([]float32, 1)
	tensor.ToFloat32(w, y.Data, y.DType)
	if v[0] != 1 || v[1] != 2 || w[0] != 1 {
		t.Fatalf("got %v %v", v, w)
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, p := range []string{"models/stories260k/model.safetensors", "tiny/llama-bf16/reference.safetensors"} {
		// Seed with a real header and the first bytes of its data.
		b, err := os.ReadFile(testdata + p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > 8 {
			n := int(binary.LittleEndian.Uint64(b))
			f.Add(b[:min(len(b), 8+n+64)])
		}
	}
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})
	f.Fuzz(func(t *testing.T, b []byte) {
		infos, start, _, err := ParseHeader(b)
		if err != nil {
			return
		}
		for _, i := range infos {
			if start+i.End > int64(len(b)) {
				t.Fatalf("accepted tensor %s beyond the file", i.Name)
			}
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	for _, p := range []string{"tiny/gemma4-mlx-q4g64", "tiny/qwen3_moe-mlx-q4g64", "tiny/llama-bf16", "profiles/mixtral-8x7b-4bit"} {
		b, err := os.ReadFile(testdata + p + "/config.json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err == nil {
			_ = c.Validate()
		}
	})
}
