package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"golang.org/x/term"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/generate"
	"github.com/mlxcel/mlxcel/internal/memplan"
	"github.com/mlxcel/mlxcel/internal/sample"
)

func init() {
	register("run", "generate text from a prompt, or chat on a terminal: run -m MODEL (default: the embedded stories260k model)", runRun)
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// modelFlags are shared by run and serve.
type modelFlags struct {
	model, backend string
	threads        int
	tensorParallel int
	ctxSize        int
	kvDtype        backend.KVDtype
	skipMemCheck   bool
}

func (f *modelFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "model folder, or Hub repository ORG/NAME[@REV] / NAME (mlx-community/NAME), pulled into the hub cache (default: the embedded stories260k)")
	fs.StringVar(&f.model, "m", "", "shorthand for --model")
	fs.StringVar(&f.backend, "backend", "auto", "cpu, cuda or auto (cuda when a device is found)")
	fs.IntVar(&f.threads, "threads", 0, "CPU threads (0: all cores)")
	fs.IntVar(&f.tensorParallel, "tensor-parallel", 1, "shard the model over N ranks (in-process CPU ranks; docs/tensor-parallel.md)")
	fs.IntVar(&f.ctxSize, "ctx-size", 0, "maximum tokens of prompt + answer, which sizes the KV cache (0: the model's context)")
	fs.Var(&f.kvDtype, "kv-cache-dtype", backend.KVDtypeUsage)
	fs.BoolVar(&f.skipMemCheck, "skip-mem-check", false, "load even when the memory estimate says the model will not fit")
}

func (f *modelFlags) load(quiet bool) (*app.Loaded, error) {
	return app.Load(app.Options{ModelDir: f.model, Backend: f.backend, Threads: f.threads, TensorParallel: f.tensorParallel, Quiet: quiet,
		Preflight: &memplan.Request{CtxSize: f.ctxSize, Parallel: 1, KVDtype: f.kvDtype, Skip: f.skipMemCheck}})
}

// engineConfig is the one-sequence engine that run and its chat use.
func (f *modelFlags) engineConfig() engine.Config {
	return engine.Config{Parallel: 1, MaxQueue: 1, MaxContext: f.ctxSize, KVDtype: f.kvDtype}
}

func runRun(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var mf modelFlags
	mf.register(fs)
	prompt := fs.String("p", "", "prompt text ('-' reads standard input)")
	fs.StringVar(prompt, "prompt", "", "prompt text")
	promptIDs := fs.String("prompt-ids", "", "prompt as token ids (JSON array or comma separated), no BOS added")
	useChat := fs.Bool("chat", false, "wrap the prompt in the model's chat template")
	system := fs.String("system", "", "system message for --chat")
	maxTokens := fs.Int("max-tokens", 256, "maximum tokens to generate")
	temp := fs.Float64("temp", 0.8, "temperature (0: greedy)")
	topK := fs.Int("top-k", 0, "top-k (0: off)")
	topP := fs.Float64("top-p", 1, "top-p (1: off)")
	minP := fs.Float64("min-p", 0, "min-p (0: off)")
	repPen := fs.Float64("repeat-penalty", 1, "repetition penalty (1: off)")
	seed := fs.Int64("seed", -1, "random seed (-1: random)")
	ignoreEOS := fs.Bool("ignore-eos", false, "do not stop at end-of-sequence tokens")
	printIDs := fs.Bool("print-ids", false, "print the generated token ids as a JSON array instead of text")
	showReasoning := fs.Bool("show-reasoning", false, "in the interactive chat, show the thought of reasoning models")
	var stops multiFlag
	fs.Var(&stops, "stop", "stop string (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if mf.model == "" && len(rest) > 0 && looksLikeModel(rest[0]) {
		// mlxcel run ORG/NAME [flags] [PROMPT]: flags may follow the name.
		mf.model = rest[0]
		if err := fs.Parse(rest[1:]); err != nil {
			return err
		}
		rest = fs.Args()
	}
	if len(rest) > 0 && *prompt == "" {
		*prompt = strings.Join(rest, " ")
	}
	if *prompt == "-" {
		b, err := readAllStdin()
		if err != nil {
			return err
		}
		*prompt = b
	}
	params := sample.Params{Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP), MinP: float32(*minP),
		RepetitionPenalty: float32(*repPen)}
	if *seed >= 0 {
		s := uint64(*seed)
		params.Seed = &s
	}
	if err := params.Validate(); err != nil {
		return err
	}
	// A named model on a terminal with no prompt opens a chat.
	interactive := mf.model != "" && *prompt == "" && *promptIDs == "" && !*printIDs &&
		term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stdout.Fd()))
	l, err := mf.load(false)
	if err != nil {
		return err
	}
	defer l.Model.Backend().Close()
	if interactive {
		chatMax := *maxTokens
		if !flagSet(fs, "max-tokens") {
			chatMax = 4096 // answers, not a benchmark: the context bounds them
		}
		return runChat(l, chatFlags{params: params, maxTokens: chatMax, engine: mf.engineConfig(), system: *system, stops: stops,
			showReasoning: *showReasoning})
	}

	ids, err := buildPrompt(l, *prompt, *promptIDs, *useChat, *system)
	if err != nil {
		return err
	}
	eng, err := engine.New(l.Model, mf.engineConfig())
	if err != nil {
		return err
	}
	eng.Start()
	defer eng.Stop()
	if len(ids)+1 > eng.MaxContext() {
		return fmt.Errorf("prompt of %d tokens does not fit the %d-token context", len(ids), eng.MaxContext())
	}
	max := min(*maxTokens, eng.MaxContext()-len(ids))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	out := bufio.NewWriter(os.Stdout)
	res, err := generate.Run(ctx, eng, l.Tokenizer.NewStreamDecoder(true), generate.Request{
		Request: engine.Request{Prompt: ids, Params: params, MaxTokens: max, StopIDs: l.StopIDs, IgnoreEOS: *ignoreEOS},
		Stop:    stops,
	}, func(d generate.Delta) error {
		if *printIDs {
			return nil
		}
		out.WriteString(d.Text)
		return out.Flush()
	})
	if err != nil {
		return err
	}
	if *printIDs {
		b, _ := json.Marshal(res.Tokens)
		out.Write(b)
	}
	fmt.Fprintln(out)
	out.Flush()
	if res.Err != nil && !errors.Is(res.Err, context.Canceled) {
		return res.Err
	}
	t := res.Timing
	fmt.Fprintf(os.Stderr, "\nprompt: %d tokens, %.1f ms, %.1f tok/s | decode: %d tokens, %.1f ms, %.1f tok/s | finish: %s | %s on %s\n",
		t.PromptTokens, ms(t.Prefill), t.PromptTokS, t.GeneratedTokens, ms(t.Decode), t.DecodeTokS, res.FinishReason,
		l.Name, l.Model.Backend().Name())
	return nil
}

// buildPrompt picks the prompt ids: explicit ids, a chat-templated
// conversation, plain text, or (nothing given) a lone BOS.
func buildPrompt(l *app.Loaded, text, idList string, useChat bool, system string) ([]int32, error) {
	if idList != "" {
		return parseIDs(idList)
	}
	if useChat {
		if l.Template == nil {
			return nil, fmt.Errorf("%s has no chat template (chat_template.jinja or tokenizer_config.json)", l.Dir)
		}
		var msgs []chat.Message
		if system != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: system})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: text})
		rendered, err := l.Template.Render(msgs, true, nil)
		if err != nil {
			return nil, err
		}
		// The template writes BOS itself where the model wants one.
		return l.Tokenizer.Encode(rendered, false)
	}
	if text == "" {
		bos, ok := l.Tokenizer.BOS()
		if !ok {
			return nil, fmt.Errorf("no prompt given and the tokenizer has no BOS token to start from")
		}
		return []int32{bos}, nil
	}
	return l.Tokenizer.Encode(text, true)
}

func parseIDs(s string) ([]int32, error) {
	s = strings.TrimSpace(s)
	var ids []int32
	if strings.HasPrefix(s, "[") {
		if err := json.Unmarshal([]byte(s), &ids); err != nil {
			return nil, fmt.Errorf("token ids: %v", err)
		}
		return ids, nil
	}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("token ids: %q is not an integer", f)
		}
		ids = append(ids, int32(n))
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("token ids: none given")
	}
	return ids, nil
}

func readAllStdin() (string, error) {
	var b strings.Builder
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	first := true
	for sc.Scan() {
		if !first {
			b.WriteByte('\n')
		}
		first = false
		b.WriteString(sc.Text())
	}
	return b.String(), sc.Err()
}
