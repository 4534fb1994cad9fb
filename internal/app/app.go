// Package app wires a model directory into a ready engine: backend,
// weights, tokenizer, chat template and stop tokens. The CLI commands and
// the binaries share it so they load models the same way.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/mlxcel/mlxcel/internal/backend"
	_ "github.com/mlxcel/mlxcel/internal/backend/backends" // every backend, in every binary
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/memplan"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"github.com/mlxcel/mlxcel/internal/tokenizer"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Options choose what to load and where to run it.
type Options struct {
	ModelDir string // a folder, a Hub name (ORG/NAME[@REV], NAME) or empty: the embedded default model
	Backend  string // cpu, cuda, auto
	Threads  int
	// TensorParallel, above 1, shards the model over that many ranks
	// (docs/tensor-parallel.md): in-process CPU ranks for now.
	TensorParallel int
	Quiet          bool // no progress bar
	// Preflight, when set, checks the memory estimate for this sizing
	// before the weights are loaded (internal/memplan).
	Preflight *memplan.Request
}

// Loaded is a model ready to serve.
type Loaded struct {
	Name      string // directory base name or the default model's name
	Dir       string
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	Template  *chat.Template // nil when the model has none
	StopIDs   []int32        // EOS ids from generation_config, config and tokenizer
	GenConfig chat.GenerationConfig
	LoadTime  time.Duration
	// TemplateErr is why the chat template could not be loaded (a syntax
	// error, naming the file); nil when it loaded or the model has none.
	// The model still serves completions.
	TemplateErr error
	// Warnings are problems that did not stop the load (one line each,
	// naming the file): the caller logs them.
	Warnings []string
}

// Load loads everything; errors are one line naming the problem.
func Load(o Options) (*Loaded, error) {
	start := time.Now()
	dir, name, err := ResolveModel(context.Background(), o.ModelDir, os.Stderr)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("model directory %s: %v", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("model directory %s: not a directory", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		return nil, fmt.Errorf("model directory %s: no tokenizer.json", dir)
	}
	if err := weights.CheckModelFiles(dir); err != nil {
		return nil, err // a FIFO would block its reader for ever
	}
	cfg, err := weights.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", cfg.Path, err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	name0 := o.Backend
	if name0 == "" {
		name0 = "auto"
	}
	be, err := backend.New(name0, backend.Options{Threads: o.Threads})
	if err != nil {
		return nil, err
	}
	if o.Preflight != nil {
		if err := Preflight(cfg, dir, be, *o.Preflight, name); err != nil {
			be.Close()
			return nil, err
		}
	}
	bar := newBar(dir, o.Quiet)
	lo := model.LoadOptions{Progress: func(_ string, n int64) {
		if bar != nil {
			bar.Add64(n)
		}
	}}
	var m *model.Model
	if o.TensorParallel > 1 {
		m, err = loadParallel(dir, be, o, lo)
	} else {
		m, err = model.Load(dir, be, lo)
	}
	if bar != nil {
		bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
	if err != nil {
		be.Close()
		return nil, err
	}
	l := &Loaded{Name: name, Dir: dir, Model: m, Tokenizer: tok}
	l.Template, l.TemplateErr = chat.Load(dir)
	if errors.Is(l.TemplateErr, chat.ErrNoTemplate) {
		l.TemplateErr = nil
	} else if l.TemplateErr != nil {
		l.Warnings = append(l.Warnings, l.TemplateErr.Error()+" (chat requests will be refused)")
	}
	var gcErr error
	if l.GenConfig, gcErr = chat.LoadGenerationConfig(dir); gcErr != nil {
		l.Warnings = append(l.Warnings, gcErr.Error()+" (ignored)")
	}
	l.Warnings = append(l.Warnings, l.GenConfig.Ignored...)
	var tokEOS []int32
	if id, ok := tok.EOS(); ok {
		tokEOS = append(tokEOS, id)
	}
	if l.StopIDs, err = chat.StopTokenIDs(dir, tokEOS); err != nil {
		return nil, err
	}
	l.LoadTime = time.Since(start)
	return l, nil
}

// loadParallel loads dir over o.TensorParallel in-process CPU ranks, be
// being rank 0's backend; the threads are shared out among the ranks.
// The CUDA backend has no collectives yet (docs/tensor-parallel.md).
func loadParallel(dir string, be backend.Backend, o Options, lo model.LoadOptions) (*model.Model, error) {
	n := o.TensorParallel
	if be.Name() != "cpu" {
		return nil, fmt.Errorf("--tensor-parallel %d: the %s backend cannot run tensor parallelism yet (multi-GPU runs need NCCL, not built); use --backend cpu", n, be.Name())
	}
	m, err := LoadParallelCPU(dir, n, o.Threads, lo)
	if err != nil {
		return nil, err // the caller closes be
	}
	be.Close() // replaced by rank 0's, which has its share of the threads
	return m, nil
}

// LoadParallelCPU loads dir sharded over n in-process CPU ranks, threads
// (<= 0: GOMAXPROCS) shared out among them. The model's Backend closes
// every rank's.
func LoadParallelCPU(dir string, n, threads int, lo model.LoadOptions) (*model.Model, error) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	var bes []backend.Backend
	for len(bes) < n {
		bes = append(bes, cpu.New(max(threads/n, 1)))
	}
	m, err := model.LoadParallel(dir, bes, cpu.NewGroup(n), lo)
	if err != nil {
		for _, b := range bes {
			b.Close()
		}
		return nil, err
	}
	return m, nil
}

// newBar shows load progress for big models on a terminal only.
func newBar(dir string, quiet bool) *progressbar.ProgressBar {
	if quiet || !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	var total int64
	files, _ := weights.WeightFiles(dir)
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			total += st.Size()
		}
	}
	if total < 64<<20 {
		return nil
	}
	return progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowBytes(true),
		progressbar.OptionSetDescription("loading "+filepath.Base(dir)), progressbar.OptionThrottle(100*time.Millisecond))
}

// ProfileOptions select a synthetic model: deterministic random weights
// of a real checkpoint's shapes and quantization (internal/profiles, embedded), with
// the real tokenizer of that checkpoint family, for benchmarks on
// machines that cannot download weights. Outputs are noise; speeds are
// the real model's.
type ProfileOptions struct {
	Profile     string // an embedded profile name or a folder with config.json
	ProfilesDir string
	Tokenizer   string // folder with tokenizer.json; default: the family's
	Backend     string
	Threads     int
	Preflight   *memplan.Request // as Options.Preflight
}

// LoadProfile builds a synthetic model; Name is "synthetic:<profile>".
func LoadProfile(o ProfileOptions) (*Loaded, error) {
	start := time.Now()
	dir, err := synthetic.FindProfile(o.Profile, o.ProfilesDir)
	if err != nil {
		return nil, err
	}
	cfg, err := weights.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	tokSpec := o.Tokenizer
	if tokSpec == "" {
		name, ok := synthetic.TokenizerName(cfg)
		if !ok {
			return nil, fmt.Errorf("profile %s: no tokenizer paired with model_type %q; pass --tokenizer", o.Profile, cfg.ModelType)
		}
		tokSpec = name
	}
	tokDir, err := synthetic.FindTokenizer(tokSpec)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(tokDir)
	if err != nil {
		return nil, err
	}
	name := o.Backend
	if name == "" {
		name = "auto"
	}
	be, err := backend.New(name, backend.Options{Threads: o.Threads})
	if err != nil {
		return nil, err
	}
	if o.Preflight != nil {
		if err := profilePreflight(cfg, be, *o.Preflight, "synthetic:"+filepath.Base(dir)); err != nil {
			be.Close()
			return nil, err
		}
	}
	m, _, err := synthetic.Build(cfg, be, synthetic.Options{})
	if err != nil {
		be.Close()
		return nil, err
	}
	l := &Loaded{Name: "synthetic:" + filepath.Base(dir), Dir: dir, Model: m, Tokenizer: tok, StopIDs: cfg.EOS}
	l.LoadTime = time.Since(start)
	return l, nil
}
