package bench

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"github.com/mlxcel/mlxcel/internal/profiles"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Representative is the ladder's default profile set: the checkpoints the
// benchmarks cover (see internal/profiles/README.md).
var Representative = []string{
	"llama-3.1-8b-4bit", "qwen2.5-7b-4bit", "qwen3-30b-a3b-4bit", "mixtral-8x7b-4bit", "gemma-4-31b-it-4bit",
}

// tokenizerFallbacks stand in for a paired tokenizer that encodes
// nothing. The shared mixtral tokenizer.json lost its vocabulary in
// conversion (3 tokens, no merges: every text encodes to no ids, its
// golden file too); stories260k's is the same kind (SentencePiece-style
// BPE with byte fallback, <s> = 1) with ids inside Mixtral's 32000, and a
// prompt is cut to exactly N tokens either way, so the prefill and decode
// work is the same. The substitution is logged.
var tokenizerFallbacks = map[string]string{"mixtral": "stories260k"}

// usableTokenizer checks that enc encodes the corpus; if it does not and
// the tokenizer came from a profile's pairing (paired), the fallback for
// that name is loaded instead.
func usableTokenizer(enc Encoder, name string, paired bool, log io.Writer) (Encoder, error) {
	ids, err := enc.Encode(Corpus, false)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 {
		return enc, nil
	}
	fb, ok := tokenizerFallbacks[name]
	if !paired || !ok {
		return nil, fmt.Errorf("tokenizer %s encodes the prompt corpus to no tokens; pass --tokenizer DIR", name)
	}
	dir, err := synthetic.FindTokenizer(fb)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s encodes nothing and its stand-in: %v", name, err)
	}
	if enc, err = LoadTokenizer(dir); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "warning: tokenizer %s encodes nothing (empty vocabulary); using %s (%s) to build prompts of the same token counts\n", name, fb, dir)
	return usableTokenizer(enc, fb, false, log)
}

func isFile(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }

// ListProfiles prints the embedded profiles with their shapes.
func ListProfiles(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROFILE\tARCHITECTURE\tLAYERS\tHIDDEN\tEXPERTS\tQUANTIZATION")
	for _, name := range profiles.Names() {
		dir, err := profiles.Dir(name)
		if err != nil {
			return err
		}
		cfg, err := weights.LoadConfig(dir)
		if err == nil {
			_, err = synthetic.Plan(cfg) // what building its weights needs
		}
		if err != nil {
			// A profile of a family still being built is listed with the
			// reason rather than hiding the others.
			fmt.Fprintf(tw, "%s\t(not loadable yet)\t\t\t\t%v\n", name, err)
			continue
		}
		experts, quant := "-", "none"
		if cfg.NumExperts > 0 {
			experts = fmt.Sprintf("%d, top-%d", cfg.NumExperts, cfg.TopK)
		}
		if q := cfg.Quant.Default; q != nil {
			quant = fmt.Sprintf("%d-bit, group %d", q.Bits, q.GroupSize)
			if q.Mode != "" && q.Mode != "affine" {
				quant = fmt.Sprintf("%s, group %d", q.Mode, q.GroupSize)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", name, synthetic.ModelType(cfg), cfg.Layers, cfg.Hidden, experts, quant)
	}
	return tw.Flush()
}
