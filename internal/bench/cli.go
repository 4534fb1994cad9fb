package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/profiles"
)

// Main runs `mlxcel bench <decode|ladder|serve> [flags]`.
func Main(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, "usage: mlxcel bench <decode|ladder|serve> [flags]\n\n"+
			"  decode  prefill and decode throughput of one model (real checkpoint or synthetic profile)\n"+
			"  ladder  the representative profiles x prompt lengths: CSV, markdown summary and chart\n"+
			"  serve   load generator for any OpenAI-compatible server\n"+
			"  profiles  list the embedded model profiles (--profile NAME)\n\n"+
			"profiles: "+strings.Join(profiles.Names(), ", "))
		if len(args) == 0 {
			return errors.New("missing subcommand")
		}
		return nil
	}
	switch args[0] {
	case "decode":
		return DecodeMain(args[1:], stdout, stderr)
	case "ladder":
		return LadderMain(args[1:], stdout, stderr)
	case "serve":
		return ServeMain(args[1:], stdout, stderr)
	case "profiles":
		return ListProfiles(stdout)
	}
	return fmt.Errorf("unknown bench subcommand %q (decode, ladder, serve, profiles)", args[0])
}

// intList parses "512,2048" (a flag.Value).
type intList []int

func (l *intList) String() string {
	var s []string
	for _, n := range *l {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a non-negative integer", f)
		}
		*l = append(*l, n)
	}
	if len(*l) == 0 {
		return errors.New("empty list")
	}
	return nil
}

// stringList parses "a,b,c".
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*l = append(*l, f)
		}
	}
	if len(*l) == 0 {
		return errors.New("empty list")
	}
	return nil
}

// modelFlags are the flags decode and ladder share.
type modelFlags struct {
	backend, profilesDir, tokenizer    string
	threads, maxTokens, warmup, repeat int
	maxPrefillSec                      float64
	prefillChunk                       int
	kvDtype                            backend.KVDtype
	seed                               uint64
	skipMemCheck, quiet                bool
	memLimitGiB                        float64
}

func (m *modelFlags) register(fs *flag.FlagSet, maxTokens, warmup int) {
	fs.StringVar(&m.backend, "backend", "auto", "backend: cpu, cuda or auto (cuda when it starts, else cpu)")
	fs.IntVar(&m.threads, "threads", 0, "CPU backend worker goroutines (0: all cores)")
	fs.StringVar(&m.profilesDir, "profiles-dir", "", "folder of model profiles (default: the profiles embedded in the binary)")
	fs.StringVar(&m.tokenizer, "tokenizer", "", "tokenizer folder (with tokenizer.json) or shared tokenizer name, overriding the model's own / the profile's pairing")
	fs.IntVar(&m.maxTokens, "max-tokens", maxTokens, "tokens to decode after the prompt (greedy, no EOS stop)")
	help := "untimed runs before the measured ones"
	if warmup < 0 {
		help += " (-1: 1 on cuda, where the first run also picks cuBLAS algorithms and grows buffers; 0 on cpu)"
	}
	fs.IntVar(&m.warmup, "warmup", warmup, help)
	fs.IntVar(&m.repeat, "repeat", 1, "measured runs; the row has their mean")
	fs.IntVar(&m.prefillChunk, "prefill-chunk", 0, fmt.Sprintf("prompt tokens per forward step during prefill (0: %d on cuda, as mlxcel serve; %d on cpu)",
		engine.DefaultPrefillChunkGPU, cpuBenchChunk))
	fs.Var(&m.kvDtype, "kv-cache-dtype", backend.KVDtypeUsage)
	fs.Float64Var(&m.maxPrefillSec, "max-prefill-seconds", 0, "skip a prompt whose prefill is estimated (quadratically, from the model's previous point) to take longer (0: no limit)")
	fs.Uint64Var(&m.seed, "seed", 0, "seed of synthetic weights")
	fs.BoolVar(&m.skipMemCheck, "skip-mem-check", false, "run even when the memory estimate says it will not fit")
	fs.BoolVar(&m.quiet, "quiet", false, "no progress log on stderr")
	fs.Float64Var(&m.memLimitGiB, "mem-limit-gib", 0, "memory the estimate may plan for, in GiB (default: what the backend reports free)")
}

func (m *modelFlags) options(stderr io.Writer) DecodeOptions {
	o := DecodeOptions{Backend: m.backend, Threads: m.threads, ProfilesDir: m.profilesDir, Tokenizer: m.tokenizer,
		MaxTokens: m.maxTokens, Warmup: m.warmup, Repeat: m.repeat, PrefillChunk: m.prefillChunk, KVDtype: m.kvDtype, MaxPrefillSeconds: m.maxPrefillSec, Seed: m.seed,
		SkipMemCheck: m.skipMemCheck, MemLimit: int64(m.memLimitGiB * (1 << 30)), Log: stderr}
	if m.quiet {
		o.Log = io.Discard
	}
	return o
}

func newFlagSet(name string, stderr io.Writer, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n\nflags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// DecodeMain is `mlxcel bench decode` and `mlxcel-bench-decode`.
func DecodeMain(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench decode", stderr, "mlxcel bench decode (--model DIR | --profile NAME) [flags]")
	var mf modelFlags
	mf.register(fs, 100, 1)
	modelDir := fs.String("model", "", "model folder (config.json, *.safetensors, tokenizer.json) or Hub name ORG/NAME")
	fs.StringVar(modelDir, "m", "", "shorthand for --model")
	profile := fs.String("profile", "", "model profile name (see mlxcel bench profiles): synthetic weights of its exact shapes")
	var prompts intList
	fs.Var(&prompts, "prompt-tokens", "long-prompt length(s) in tokens, comma-separated (default: the short prompt \""+ShortPrompt+"\")")
	csvPath := fs.String("csv", "", "append rows to this CSV (header written when the file is new)")
	var batches intList
	fs.Var(&batches, "batch", "batch sizes, comma-separated: measure decode steps of that many sequences instead of the prompt ladder")
	batchCtx := fs.Int("context", 1024, "with --batch: tokens of KV each sequence holds")
	steps := fs.Int("steps", 32, "with --batch: measured decode steps a point")
	tpN := fs.Int("tensor-parallel", 1, "shard the model over N in-process CPU ranks (docs/tensor-parallel.md; --backend cpu, a checkpoint, not --profile)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	o := mf.options(stderr)
	if *modelDir != "" {
		dir, name, err := app.ResolveModel(context.Background(), *modelDir, stderr)
		if err != nil {
			return err
		}
		*modelDir, o.ModelName = dir, name
	}
	o.Model, o.Profile, o.PromptTokens = *modelDir, *profile, prompts
	o.Batches, o.Context, o.Steps = batches, *batchCtx, *steps
	o.TensorParallel = *tpN
	var csvErr error
	var batchRows []BatchRow
	o.OnBatchRow = func(r BatchRow) {
		batchRows = append(batchRows, r)
		if *csvPath != "" {
			if err := AppendBatchCSV(*csvPath, []BatchRow{r}); err != nil && csvErr == nil {
				csvErr = err
			}
		}
	}
	if *csvPath != "" {
		o.OnRow = func(r Row) {
			if err := AppendCSV(*csvPath, []Row{r}); err != nil && csvErr == nil {
				csvErr = err
			}
		}
	}
	rows, runErr := RunDecode(o)
	if len(rows) > 0 {
		PrintTable(stdout, rows)
	}
	if len(batchRows) > 0 {
		PrintBatchTable(stdout, batchRows)
	}
	return cmpOr(csvErr, runErr)
}

// PrintTable writes rows as an aligned text table.
func PrintTable(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tprompt\tprefill ms\tprefill tok/s\tgen\tdecode ms\tdecode tok/s\tstatus\t")
	for _, r := range rows {
		if r.Status != StatusOK {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t%s\t\n", r.Model, promptDesc(r), r.Status)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%d\t%.1f\t%.2f\t%s\t\n", r.Model, r.PromptTokens, r.PrefillMS, r.PrefillTokS(),
			r.GeneratedTokens, r.DecodeMS, r.DecodeTokS(), r.Status)
	}
	tw.Flush()
}

func promptDesc(r Row) string {
	if r.PromptTargetLen > 0 {
		return strconv.Itoa(r.PromptTargetLen)
	}
	return "short"
}

// exitOnErr is for the commands' main functions.
func exitOnErr(name string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// CommandMain runs a bench front end as a program's main (the
// mlxcel-bench-decode binary).
func CommandMain(name string, run func(args []string, stdout, stderr io.Writer) error) {
	exitOnErr(name, run(os.Args[1:], os.Stdout, os.Stderr))
}
