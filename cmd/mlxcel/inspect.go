package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/memplan"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

func init() {
	register("inspect", "describe a model (folder or ORG/NAME): architecture, parameters, quantization, memory estimate", runInspect)
}

// layerIndex strips the layer number so per-layer tensors group by kind.
var layerIndex = regexp.MustCompile(`\.layers\.\d+\.`)

type inspectReport struct {
	Dir           string            `json:"dir"`
	Architecture  string            `json:"architecture"`
	Supported     bool              `json:"supported"`
	Layers        int               `json:"layers"`
	Hidden        int               `json:"hidden_size"`
	Heads         string            `json:"heads"`
	Vocab         int               `json:"vocab_size"`
	Context       int               `json:"max_context"`
	Experts       string            `json:"experts,omitempty"`
	Parameters    int64             `json:"parameters"`
	WeightBytes   int64             `json:"weight_bytes"`
	KVBytesPerTok int64             `json:"kv_bytes_per_token_f32"`
	StateBytes    int64             `json:"recurrent_state_bytes_per_sequence,omitempty"`
	Quantization  map[string]string `json:"quantization"`
	Tokenizer     bool              `json:"tokenizer"`
	ChatTemplate  string            `json:"chat_template"`
	Skipped       int               `json:"skipped_tensors,omitempty"`
	Estimate      *memoryEstimate   `json:"memory_estimate,omitempty"`
}

func runInspect(args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	var spec string
	var req memplan.Request
	be := fs.String("backend", "auto", "backend the memory estimate is for: cpu, cuda or auto")
	fs.IntVar(&req.CtxSize, "ctx-size", 0, "context of the memory estimate (0: the model's)")
	fs.IntVar(&req.Parallel, "parallel", 1, "sequences of the memory estimate (mlxcel serve --parallel)")
	fs.Var(&req.KVDtype, "kv-cache-dtype", "KV cache dtype of the memory estimate (mlxcel serve --kv-cache-dtype: "+backend.KVDtypes+")")
	fs.StringVar(&spec, "model", "", "model folder or Hub name ORG/NAME (or give it as the argument)")
	fs.StringVar(&spec, "m", "", "shorthand for --model")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 1 && spec == "" {
		spec = fs.Arg(0)
	}
	if spec == "" || fs.NArg() > 1 || (fs.NArg() == 1 && spec != fs.Arg(0)) {
		return fmt.Errorf("usage: mlxcel inspect [--json] DIR|ORG/NAME")
	}
	dir, _, err := app.ResolveModel(context.Background(), spec, os.Stderr)
	if err != nil {
		return err
	}
	r, err := inspect(dir)
	if err != nil {
		return err
	}
	if r.Estimate, err = estimateMemory(dir, *be, req); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Printf("model         %s\n", r.Dir)
	fmt.Printf("architecture  %s (supported: %v)\n", r.Architecture, r.Supported)
	fmt.Printf("shape         %d layers, hidden %d, heads %s, vocab %d, context %d\n", r.Layers, r.Hidden, r.Heads, r.Vocab, r.Context)
	if r.Experts != "" {
		fmt.Printf("experts       %s\n", r.Experts)
	}
	fmt.Printf("parameters    %s\n", humanCount(r.Parameters))
	fmt.Printf("memory        %s of weights, %s of KV cache per 1k tokens (f32)", humanBytes(r.WeightBytes), humanBytes(r.KVBytesPerTok*1000))
	if r.StateBytes > 0 {
		fmt.Printf(" + %s of recurrent state per sequence", humanBytes(r.StateBytes))
	}
	fmt.Println()
	if e := r.Estimate; e != nil {
		fmt.Printf("estimate      %s\n", e.Summary)
	}
	fmt.Println("quantization")
	var kinds []string
	for k := range r.Quantization {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Printf("  %-40s %s\n", k, r.Quantization[k])
	}
	fmt.Printf("tokenizer     %v\n", r.Tokenizer)
	fmt.Printf("chat template %s\n", r.ChatTemplate)
	if r.Skipped > 0 {
		fmt.Printf("note          %d tensors of vision/audio towers are not loaded (text only)\n", r.Skipped)
	}
	return nil
}

func inspect(dir string) (*inspectReport, error) {
	cfg, err := weights.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	ck, err := weights.Open(dir, cfg.Quant)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	r := &inspectReport{Dir: dir, Architecture: cfg.ModelType, Layers: cfg.Layers, Hidden: cfg.Hidden,
		Heads: fmt.Sprintf("%d q / %d kv x %d", cfg.Heads, cfg.KVHeads, cfg.HeadDim), Vocab: cfg.Vocab,
		Context: model.ContextOf(cfg), Quantization: map[string]string{}, Skipped: len(ck.Skipped)}
	if t, ok := cfg.Raw["text_model_type"].(string); ok {
		r.Architecture += "/" + t
	}
	for _, s := range model.Supported() {
		if s == cfg.ModelType || s == cfg.Raw["text_model_type"] {
			r.Supported = true
		}
	}
	if cfg.NumExperts > 0 {
		r.Experts = fmt.Sprintf("%d experts, top-%d", cfg.NumExperts, cfg.TopK)
	}
	if r.Supported {
		// As the CPU backend keeps it (float32), every layer paged: shared
		// and linear-attention layers keep no K/V.
		layers, err := model.KVLayersFor(cfg)
		if err != nil {
			return nil, err
		}
		c := backend.KVCostOf(cpu.New(1), backend.KVSpec{BlockSize: 1, Slots: 1, Layers: layers})
		r.KVBytesPerTok, r.StateBytes = c.PerBlock, c.Fixed
	}
	for _, name := range ck.Names() {
		info, _, _ := ck.Info(name)
		r.WeightBytes += info.End - info.Begin
		if strings.HasSuffix(name, ".scales") || strings.HasSuffix(name, ".biases") && ck.Has(strings.TrimSuffix(name, ".biases")+".scales") {
			continue
		}
		kind := layerIndex.ReplaceAllString(name, ".layers.*.")
		kind = regexp.MustCompile(`\.experts\.\d+\.`).ReplaceAllString(kind, ".experts.*.")
		module := strings.TrimSuffix(name, ".weight")
		if ck.Has(module+".scales") && info.DType == tensor.U32 {
			h, err := ck.Linear(module, linearShape(ck, module, info)...)
			if err != nil {
				return nil, err
			}
			r.Parameters += info.Elements() * 32 / int64(h.Quant.Bits)
			desc := fmt.Sprintf("%d-bit, group %d", h.Quant.Bits, h.Quant.GroupSize)
			if m := h.Quant.Mode; m != "" && m != "affine" {
				desc = m + " (" + desc + ")"
			}
			r.Quantization[strings.TrimSuffix(kind, ".weight")] = desc
			continue
		}
		if strings.HasSuffix(name, "_scales") && ck.Has(strings.TrimSuffix(name, "_scales")+"_blocks") {
			continue
		}
		if strings.HasSuffix(name, "_blocks") && info.DType == tensor.U8 {
			// openai's MXFP4 experts: two E2M1 codes a byte.
			r.Parameters += 2 * info.Elements()
			r.Quantization[strings.TrimSuffix(kind, "_blocks")] = "mxfp4 (openai blocks, 4-bit, group 32)"
			continue
		}
		r.Parameters += info.Elements()
		if strings.HasSuffix(name, ".weight") && len(info.Shape) >= 2 {
			r.Quantization[strings.TrimSuffix(kind, ".weight")] = "unquantized " + info.DType.String()
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err == nil {
		r.Tokenizer = true
	}
	r.ChatTemplate = "none"
	if _, err := os.Stat(filepath.Join(dir, "chat_template.jinja")); err == nil {
		r.ChatTemplate = "chat_template.jinja"
	} else if b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		var tc map[string]any
		if json.Unmarshal(b, &tc) == nil && tc["chat_template"] != nil {
			r.ChatTemplate = "tokenizer_config.json"
		}
	}
	return r, nil
}

// linearShape recovers the logical [.., out, in] of a packed weight from
// its scales: in = groups * group size, where bits follow from the packing.
func linearShape(ck *weights.Checkpoint, module string, w weights.TensorInfo) []int {
	s, _, _ := ck.Info(module + ".scales")
	groups := s.Shape[len(s.Shape)-1]
	packed := w.Shape[len(w.Shape)-1]
	// Try the standard group sizes: the one giving a valid bit width wins.
	for _, g := range []int{64, 32, 128} {
		in := groups * g
		if (packed*32)%in == 0 {
			switch packed * 32 / in {
			case 2, 3, 4, 5, 6, 8:
				if spec, ok := ck.Quant.For(module); !ok || spec.GroupSize == g {
					return append(append([]int(nil), w.Shape[:len(w.Shape)-1]...), in)
				}
			}
		}
	}
	return append(append([]int(nil), w.Shape[:len(w.Shape)-1]...), groups*64)
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func ms(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1000 }
