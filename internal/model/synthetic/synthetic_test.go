package synthetic_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"github.com/mlxcel/mlxcel/internal/profiles"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

const testdata = "../../../../shared/testdata/"

var tinyFixtures = []string{"llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "gemma4", "gemma4_moe", "gemma4_e", "gemma3_text",
	"qwen3_5_text", "qwen3_5_moe_text"}

func needTestdata(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(testdata); err != nil {
		t.Fatalf("reference data missing (../shared/testdata, see README): %v", err)
	}
}

// The plan must list exactly the tensors mlx_lm.convert (and transformers,
// for the bf16 fixtures) wrote: names, stored shapes and dtypes.
func TestPlanMatchesFixtures(t *testing.T) {
	needTestdata(t)
	for _, arch := range tinyFixtures {
		for _, kind := range []string{"-bf16", "-mlx-q4g64"} {
			dir := testdata + "tiny/" + arch + kind
			t.Run(arch+kind, func(t *testing.T) {
				if kind == "-bf16" && (arch == "qwen3_moe" || arch == "mixtral" || arch == "gemma4_moe" || arch == "qwen3_5_moe_text") {
					// transformers stores one tensor per expert; the plan
					// is mlx_lm's stacked switch_mlp layout, which is what
					// every MLX checkpoint (and the loader) uses.
					t.Skip("HF per-expert layout")
				}
				checkPlan(t, dir)
			})
		}
	}
}

// checkPlan compares the plan of dir's config with its checkpoint: names,
// stored shapes and dtypes, and total bytes.
func checkPlan(t *testing.T, dir string) {
	t.Helper()
	cfg, err := weights.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := synthetic.Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := weights.OpenFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	have := map[string]weights.TensorInfo{}
	for name, ti := range f.Tensors {
		have[weights.Canonical(name)] = ti
	}
	var fileBytes int64
	for _, ti := range have {
		fileBytes += ti.End - ti.Begin
	}
	for _, p := range plan {
		ti, ok := have[p.Name]
		if !ok {
			t.Errorf("plan has %s, the checkpoint does not", p.Name)
			continue
		}
		shape := ti.Shape
		if strings.HasSuffix(p.Name, ".conv1d.weight") && len(shape) == 3 && shape[1] == 1 {
			// transformers' [channels, 1, kernel]: mlx-lm's [channels,
			// kernel, 1] (the plan's) is the same values in the same order.
			shape = []int{shape[0], shape[2], 1}
		}
		if !slices.Equal(shape, p.Shape) || ti.DType != p.DType {
			t.Errorf("%s: plan %v %s, checkpoint %v %s", p.Name, p.Shape, p.DType, ti.Shape, ti.DType)
		}
		delete(have, p.Name)
	}
	var missing []string
	for n := range have {
		missing = append(missing, n)
	}
	sort.Strings(missing)
	for _, n := range missing {
		t.Errorf("checkpoint has %s, the plan does not", n)
	}
	if got := synthetic.TotalBytes(plan); !t.Failed() && got != fileBytes {
		t.Errorf("plan bytes %d, checkpoint data bytes %d", got, fileBytes)
	}
}

// Generated quantized tensors use the configured bits (the Qwen3-MoE
// router override included), dequantize to mean-zero weights of the
// intended spread, and are the same for the same seed.
func TestGeneratedWeights(t *testing.T) {
	needTestdata(t)
	cfg, err := weights.LoadConfig(testdata + "profiles/qwen3-30b-a3b-4bit")
	if err != nil {
		t.Fatal(err)
	}
	src, err := synthetic.New(cfg, cpu.New(1), synthetic.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	router, err := src.HostLinear("model.layers.3.mlp.gate", cfg.NumExperts, cfg.Hidden)
	if err != nil {
		t.Fatal(err)
	}
	if router.Quant.Bits != 8 || router.Quant.GroupSize != 64 {
		t.Fatalf("router quantized at %d bits group %d, want 8/64", router.Quant.Bits, router.Quant.GroupSize)
	}
	q, err := src.HostLinear("model.layers.3.self_attn.q_proj", cfg.Heads*cfg.HeadDim, cfg.Hidden)
	if err != nil {
		t.Fatal(err)
	}
	if q.Quant.Bits != 4 {
		t.Fatalf("q_proj at %d bits, want 4", q.Quant.Bits)
	}
	for _, h := range []*tensor.Host{router, q} {
		out, in := h.Shape[0], h.Shape[1]
		w := dequant(t, h, out, in)
		var sum, sq float64
		for _, v := range w {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: non-finite weight", h.Name)
			}
			sum += float64(v)
			sq += float64(v) * float64(v)
		}
		mean := sum / float64(len(w))
		std := math.Sqrt(sq/float64(len(w)) - mean*mean)
		want := 0.5 / math.Sqrt(float64(in))
		if math.Abs(mean) > want/10 || std < want*0.8 || std > want*1.25 {
			t.Errorf("%s: mean %.3g std %.3g, want ~0 and ~%.3g", h.Name, mean, std, want)
		}
	}
	again, _ := synthetic.New(cfg, cpu.New(1), synthetic.Options{Seed: 7})
	q2, _ := again.HostLinear("model.layers.3.self_attn.q_proj", cfg.Heads*cfg.HeadDim, cfg.Hidden)
	if !slices.Equal(q.Data, q2.Data) || !slices.Equal(q.Quant.Scales, q2.Quant.Scales) {
		t.Error("same seed gave different weights")
	}
	other, _ := synthetic.New(cfg, cpu.New(1), synthetic.Options{Seed: 8})
	q3, _ := other.HostLinear("model.layers.3.self_attn.q_proj", cfg.Heads*cfg.HeadDim, cfg.Hidden)
	if slices.Equal(q.Data, q3.Data) {
		t.Error("different seeds gave the same weights")
	}
	// A shape that disagrees with the real checkpoint is an error.
	if _, err := src.HostLinear("model.layers.3.self_attn.q_proj", 8, cfg.Hidden); err == nil {
		t.Error("wrong shape accepted")
	}
	norm, err := src.HostDense("model.layers.0.input_layernorm.weight", cfg.Hidden)
	if err != nil {
		t.Fatal(err)
	}
	if v := tensor.BF16ToF32(binary.LittleEndian.Uint16(norm.Data)); v != 1 {
		t.Errorf("norm weight %v, want 1", v)
	}
}

func dequant(t *testing.T, h *tensor.Host, out, in int) []float32 {
	t.Helper()
	words := make([]uint32, len(h.Data)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(h.Data[4*i:])
	}
	n := len(h.Quant.Scales) / 2
	sc, bi := make([]float32, n), make([]float32, n)
	tensor.ToFloat32(sc, h.Quant.Scales, tensor.BF16)
	tensor.ToFloat32(bi, h.Quant.Biases, tensor.BF16)
	w, err := quant.Dequantize(words, sc, bi, out, in, h.Quant.Bits, h.Quant.GroupSize)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Every tiny architecture builds from synthetic weights on the CPU and
// gives finite logits through the paged KV cache. Every fixture's family
// must be registered: a missing one is a failure, not a skip.
func TestBuildAndForward(t *testing.T) {
	needTestdata(t)
	for _, arch := range tinyFixtures {
		t.Run(arch, func(t *testing.T) {
			cfg, err := weights.LoadConfig(testdata + "tiny/" + arch + "-mlx-q4g64")
			if err != nil {
				t.Fatal(err)
			}
			checkBuildForward(t, cfg)
		})
	}
}

// checkBuildForward builds cfg's model on synthetic weights and runs a
// 20-token forward: every tensor the family asks for is predicted, the
// uploaded bytes are the plan's, and the logits are finite and vary.
func checkBuildForward(t *testing.T, cfg *weights.Config) {
	t.Helper()
	mt := synthetic.ModelType(cfg)
	if !slices.Contains(model.Supported(), mt) && !slices.Contains(model.Supported(), cfg.ModelType) {
		t.Fatalf("model family %s is not registered (have %v)", mt, model.Supported())
	}
	be := cpu.New(2)
	m, src, err := synthetic.Build(cfg, be, synthetic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if u := src.Unpredicted(); len(u) > 0 {
		t.Errorf("family asked for tensors a real checkpoint lacks: %v", u)
	}
	plan, _ := synthetic.Plan(cfg)
	if got, want := src.UploadedBytes(), synthetic.TotalBytes(plan); got != want {
		t.Errorf("uploaded %d bytes, plan says %d", got, want)
	}
	const n = 20
	kv, err := be.NewKVStore(backend.KVSpec{NumBlocks: 2, BlockSize: 16, Slots: 1, Layers: m.KVLayers()})
	if err != nil {
		t.Fatal(err)
	}
	b := &backend.Batch{Seqs: []backend.SeqSlice{{Start: 0, Len: n, Blocks: []int32{1, 0}}}, LogitRows: []int{n - 1}}
	for i := range n {
		b.Tokens = append(b.Tokens, int32(i*37%cfg.Vocab))
		b.Positions = append(b.Positions, int32(i))
	}
	logits, err := m.Forward(b, kv)
	if err != nil {
		t.Fatal(err)
	}
	var spread float32
	for _, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("non-finite logit")
		}
		spread = max(spread, float32(math.Abs(float64(v-logits[0]))))
	}
	if spread == 0 {
		t.Error("all logits equal: weights did not reach the output")
	}
}

// The profiles' plans come out at the sizes the real checkpoints have.
func TestProfilePlanSizes(t *testing.T) {
	needTestdata(t)
	// Approximate on-disk sizes of the mlx-community 4-bit conversions.
	want := map[string][2]float64{ // GB range
		"llama-3.1-8b-4bit":   {4.0, 4.8},
		"qwen2.5-7b-4bit":     {4.0, 4.6},
		"qwen2.5-0.5b-4bit":   {0.25, 0.32},
		"qwen3-30b-a3b-4bit":  {15.5, 17.5},
		"mixtral-8x7b-4bit":   {24, 27},
		"gemma-4-31b-it-4bit": {16, 19},
	}
	for name, r := range want {
		cfg, err := weights.LoadConfig(testdata + "profiles/" + name)
		if err != nil {
			t.Fatal(err)
		}
		checkPlanSize(t, name, cfg, r)
	}
}

// The profiles that exist only here (published configs, not the shared
// reference data): their plans come out at the sizes of mlx-community's
// conversions (text weights only), and a decode token reads the active
// parameters' bytes.
func TestEmbeddedProfilePlanSizes(t *testing.T) {
	for name, r := range map[string][4]float64{ // GB stored, GB a decode token
		"gpt-oss-20b-mxfp4-q8":    {11.5, 12.8, 2.4, 2.8},
		"gpt-oss-120b-mxfp4-q8":   {60, 66, 3.3, 3.8},
		"gemma-4-26b-a4b-it-4bit": {13.5, 15, 2.0, 2.4},
		"gemma-4-e4b-it-4bit":     {3.9, 4.6, 2.4, 2.9},
		// Text model only (the vision tower is not planned, as it is not
		// loaded); 4-bit g64 affine is 4.5 bits a weight.
		"qwen3.5-27b-4bit":     {14.5, 16, 13.8, 15},
		"qwen3.5-35b-a3b-4bit": {18.5, 20.5, 1.5, 1.9},
	} {
		b, err := profiles.Config(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := weights.ParseConfig(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		plan := checkPlanSize(t, name, cfg, [2]float64{r[0], r[1]})
		gb := float64(synthetic.DecodeBytes(plan, cfg)) / 1e9
		t.Logf("%s: %.2f GB a decode token", name, gb)
		if gb < r[2] || gb > r[3] {
			t.Errorf("%s: %.2f GB a decode token, want %.1f-%.1f", name, gb, r[2], r[3])
		}
	}
}

func checkPlanSize(t *testing.T, name string, cfg *weights.Config, r [2]float64) []synthetic.Tensor {
	t.Helper()
	plan, err := synthetic.Plan(cfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	gb := float64(synthetic.TotalBytes(plan)) / 1e9
	t.Logf("%s: %d tensors, %.2f GB", name, len(plan), gb)
	if gb < r[0] || gb > r[1] {
		t.Errorf("%s: %.2f GB, want %.1f-%.1f", name, gb, r[0], r[1])
	}
	return plan
}

// What a decode token reads, from the architecture alone: Llama-3.1-8B at
// 4 bits (group 64, bf16 scales and biases: 0.5625 bytes a weight) reads
// its 6.98e9 layer weights and the 525e6-weight output head, 4.22 GB;
// Qwen3-30B-A3B reads 8 of its 128 experts a layer (48 layers of 18.9e6
// attention and 37.7e6 active expert weights) and its 311e6-weight head,
// about 1.7 GB of its 16.5.
func TestDecodeBytes(t *testing.T) {
	needTestdata(t)
	for name, r := range map[string][2]float64{"llama-3.1-8b-4bit": {4.15, 4.3}, "qwen3-30b-a3b-4bit": {1.6, 1.8}} {
		cfg, err := weights.LoadConfig(testdata + "profiles/" + name)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := synthetic.Plan(cfg)
		if err != nil {
			t.Fatal(err)
		}
		gb := float64(synthetic.DecodeBytes(plan, cfg)) / 1e9
		t.Logf("%s: %.3f GB a decode token of %.2f GB stored", name, gb, float64(synthetic.TotalBytes(plan))/1e9)
		if gb < r[0] || gb > r[1] {
			t.Errorf("%s: %.3f GB a token, want %.2f-%.2f", name, gb, r[0], r[1])
		}
	}
}
