package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/settings"
)

// Flags are the command-line options of `mlxcel serve` and mlxcel-server;
// both binaries call Main, so they take exactly the same flags.
type Flags struct {
	Model, Backend string
	// Profile serves synthetic weights of a real checkpoint's shapes
	// (benchmarks without downloadable weights); outputs are noise.
	Profile, ProfilesDir, Tokenizer string
	Threads                         int
	TensorParallel                  int // ranks the model is sharded over (docs/tensor-parallel.md)
	Host                            string
	Port                            int
	Options                         Options
	ShutdownTimeout                 time.Duration
	// SkipMemCheck loads even when the memory preflight says no.
	SkipMemCheck bool
	// AllowedOrigins and AllowedHosts are the comma-separated flag values
	// (Options carries them split).
	AllowedOrigins, AllowedHosts string
}

// Register defines the flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	o := &f.Options
	fs.StringVar(&f.Model, "model", "", "model folder or Hub name ORG/NAME[@REV] / NAME (default: the embedded stories260k)")
	fs.StringVar(&f.Model, "m", "", "shorthand for --model")
	fs.StringVar(&f.Profile, "profile", "", "serve synthetic weights of this profile's shapes (benchmarks only: the text is noise)")
	fs.StringVar(&f.ProfilesDir, "profiles-dir", "", "a folder of profiles besides the embedded ones (mlxcel bench profiles lists those)")
	fs.StringVar(&f.Tokenizer, "tokenizer", "", "tokenizer folder for --profile (default: the family's real tokenizer)")
	fs.StringVar(&f.Backend, "backend", "auto", "cpu, cuda or auto (cuda when a device is found)")
	fs.IntVar(&f.Threads, "threads", 0, "CPU threads (0: all cores)")
	fs.IntVar(&f.TensorParallel, "tensor-parallel", 1, "shard the model over N ranks (in-process CPU ranks; docs/tensor-parallel.md)")
	fs.StringVar(&f.Host, "host", "127.0.0.1", "address to listen on (0.0.0.0: all interfaces)")
	fs.IntVar(&f.Port, "port", 8080, "port to listen on")
	fs.IntVar(&o.Parallel, "parallel", 0, fmt.Sprintf("sequences decoded concurrently (batch slots; 0: on a GPU as many as the KV cache holds at "+
		"min(context, %d) tokens each, up to %d; %d on cpu)", DefaultKVTokensPerSeq, MaxAutoParallel, engine.DefaultParallel))
	fs.Float64Var(&o.GPUMemoryUtilization, "gpu-memory-utilization", DefaultGPUMemoryUtilization,
		"share of the GPU's memory to plan for (weights, KV cache, activations) when no --kv-blocks or --kv-mem is given")
	fs.IntVar(&o.CtxSize, "ctx-size", 0, "maximum tokens per sequence, prompt + completion (0: the model's context length)")
	fs.IntVar(&o.KVBlocks, "kv-blocks", 0, "KV cache size in blocks (0: see --kv-mem)")
	fs.IntVar(&o.KVMemMiB, "kv-mem", 0, "KV cache size in MiB (0 with --kv-blocks 0: 4096 tokens per --parallel slot, capped by the context)")
	fs.IntVar(&o.BlockSize, "block-size", 16, "KV cache block size in tokens")
	fs.Var(&o.KVCacheDtype, "kv-cache-dtype", backend.KVDtypeUsage)
	fs.BoolVar(&o.NoPrefixCache, "no-prefix-cache", false, "do not reuse the KV of prompt prefixes shared with earlier requests")
	fs.BoolVar(&o.NoRunAhead, "no-run-ahead", false, "do not queue greedy decode steps before the previous step's tokens are read (on by default with cuda)")
	fs.IntVar(&o.MaxQueue, "max-queue", engine.DefaultMaxQueue, "requests that may wait beyond the running ones before 429 (-1: none)")
	fs.IntVar(&o.PrefillChunk, "prefill-chunk", 0, fmt.Sprintf("most prompt tokens processed per step (long prompts are chunked; 0: %d on cuda, %d on cpu)",
		engine.DefaultPrefillChunkGPU, engine.DefaultPrefillChunk))
	fs.IntVar(&o.MaxBatchedTokens, "max-batched-tokens", 0, fmt.Sprintf("most tokens of a step that also decodes running requests, the decodes included: "+
		"a long prompt is prefilled in pieces beside them (0: %d on cuda, no cap on cpu; -1: no cap)", engine.DefaultMixedBatchTokensGPU))
	fs.DurationVar(&o.ITLTarget, "itl-target", 0, "keep the steps that prefill beside running requests within this time (e.g. 80ms): "+
		"the engine learns what steps cost and gives them the prompt tokens that fit (0: the token caps only)")
	fs.StringVar(&o.APIKey, "api-key", "", "require 'Authorization: Bearer <key>' (default: $MLXCEL_API_KEY; empty: no auth)")
	fs.StringVar(&o.ServedModelName, "served-model-name", "", "model id in the API (default: the model directory's name)")
	fs.Int64Var(&o.MaxBodyBytes, "max-body", DefaultMaxBodyBytes, "largest request body in bytes (413 beyond)")
	fs.DurationVar(&f.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long running requests may take to finish")
	fs.BoolVar(&f.SkipMemCheck, "skip-mem-check", false, "load even when the memory estimate (weights + KV cache for --ctx-size x --parallel) says the model will not fit")
	o.Agent.register(fs)
	fs.IntVar(&o.MaxConns, "max-conns", DefaultMaxConns, "open connections served; past it idle ones are closed, then only /health is answered")
	fs.StringVar(&f.AllowedOrigins, "allowed-origins", "", "comma-separated web origins allowed besides the server's own ('*': any); other browser requests get 403")
	fs.StringVar(&f.AllowedHosts, "allowed-hosts", "", "comma-separated Host names served (default: any); against DNS rebinding")
}

func (f *Flags) check() error {
	o := f.Options
	switch {
	case f.Port < 0 || f.Port > 65535:
		return fmt.Errorf("--port %d is not a port", f.Port)
	case o.Parallel < 0:
		return fmt.Errorf("--parallel must not be negative (0: sized from memory on a GPU)")
	case o.GPUMemoryUtilization <= 0 || o.GPUMemoryUtilization > 1:
		return fmt.Errorf("--gpu-memory-utilization %g: want a fraction in (0, 1]", o.GPUMemoryUtilization)
	case o.CtxSize < 0, o.KVBlocks < 0, o.KVMemMiB < 0, o.PrefillChunk < 0, o.BlockSize < 1:
		return fmt.Errorf("--ctx-size, --kv-blocks, --kv-mem and --prefill-chunk must not be negative, --block-size at least 1")
	case f.Profile != "" && f.Model != "":
		return fmt.Errorf("give --model or --profile, not both")
	case f.TensorParallel < 0:
		return fmt.Errorf("--tensor-parallel must not be negative (1: unsharded)")
	case f.TensorParallel > 1 && f.Profile != "":
		return fmt.Errorf("--tensor-parallel with --profile is not supported yet (synthetic weights are built unsharded)")
	case o.KVBlocks > 0 && o.KVMemMiB > 0:
		return fmt.Errorf("give --kv-blocks or --kv-mem, not both")
	case o.ITLTarget < 0:
		return fmt.Errorf("--itl-target %v must not be negative (0: off)", o.ITLTarget)
	}
	return o.Agent.check()
}

// Main parses args and serves until SIGINT or SIGTERM. name is the
// command name for usage messages.
func Main(name string, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f Flags
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // the usage was printed: asking for it is no failure
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if f.Options.APIKey == "" {
		f.Options.APIKey = settings.Get("MLXCEL_API_KEY")
	}
	if err := f.check(); err != nil {
		return err
	}
	f.resolve()
	f.Options.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	if f.Profile != "" {
		// Synthetic models have no chat template; chat requests use the
		// plain fallback (docs/server.md).
		f.Options.PlainChat = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go watchSignals(sigs, cancel, func() { os.Exit(1) }, f.Options.Logger)
	return f.serve(ctx)
}

// serve listens first, then loads the model, so /health answers 503
// during a long load instead of refusing connections.
func (f *Flags) serve(ctx context.Context) error {
	log := f.Options.Logger
	s := New(f.Options)
	ln, err := net.Listen("tcp", net.JoinHostPort(f.Host, strconv.Itoa(f.Port)))
	if err != nil {
		return err
	}
	hs := &http.Server{}
	ln = s.HTTPServer(hs, ln)
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	log.Info("listening", "addr", "http://"+ln.Addr().String(), "chat", "http://"+ln.Addr().String()+"/", "auth", f.Options.APIKey != "")

	type loadResult struct {
		l   *app.Loaded
		err error
	}
	loaded := make(chan loadResult, 1)
	go func() {
		var l *app.Loaded
		var err error
		if f.Profile != "" {
			l, err = app.LoadProfile(app.ProfileOptions{Profile: f.Profile, ProfilesDir: f.ProfilesDir,
				Tokenizer: f.Tokenizer, Backend: f.Backend, Threads: f.Threads, Preflight: f.preflight()})
		} else {
			l, err = app.Load(app.Options{ModelDir: f.Model, Backend: f.Backend, Threads: f.Threads, TensorParallel: f.TensorParallel,
				Quiet: true, Preflight: f.preflight()})
		}
		if err == nil {
			if err = s.Ready(l); err != nil {
				l.Model.Backend().Close()
			}
		}
		loaded <- loadResult{l, err}
	}()

	var l *app.Loaded
	for l == nil {
		select {
		case r := <-loaded:
			if r.err != nil {
				hs.Close()
				return r.err
			}
			l = r.l
			log.Info("loaded", "model", l.Name, "dir", l.Dir, "seconds", l.LoadTime.Seconds())
		case err := <-serveErr:
			return err
		case <-ctx.Done():
			// Loading cannot be interrupted; exiting drops it.
			hs.Close()
			return nil
		}
	}
	defer l.Model.Backend().Close()

	select {
	case err := <-serveErr:
		s.Close()
		return err
	case <-ctx.Done():
	}
	return shutdown(hs, s, f.ShutdownTimeout, log)
}
