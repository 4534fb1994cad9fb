package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// DecodeOptions configure a decode benchmark of one model.
type DecodeOptions struct {
	Model       string // checkpoint folder (or Profile)
	ModelName   string // the model column for Model ("": the folder's name); a Hub repository's name
	Profile     string // profile name or folder: synthetic weights
	ProfilesDir string // where profile names are looked up ("" = search)
	Tokenizer   string // tokenizer folder or shared name; "" = the model's own / the profile's pairing
	Backend     string // cpu, cuda, auto
	Threads     int
	// PromptTokens lists target prompt lengths; 0 means the short prompt.
	PromptTokens []int
	MaxTokens    int
	Warmup       int // -1: 1 on cuda, 0 on cpu
	Repeat       int
	PrefillChunk int             // 0: DefaultPrefillChunk of the backend
	KVDtype      backend.KVDtype // --kv-cache-dtype ("": the backend's own)
	// MaxPrefillSeconds (> 0) skips a prompt whose prefill is estimated to
	// take longer (StatusSkipTime).
	MaxPrefillSeconds float64
	Seed              uint64
	// SkipMemCheck runs even when the estimate says it will not fit.
	SkipMemCheck bool
	// MemLimit, when positive, replaces the detected available memory
	// (bytes): to plan for a smaller machine, or to test the skip path.
	MemLimit int64
	// Batches, when set, runs the batch ladder instead of the prompt
	// ladder: decode steps of that many sequences at Context tokens each
	// (Steps measured steps a point), reported as BatchRows.
	Batches    []int
	Context    int
	Steps      int
	OnBatchRow func(BatchRow)
	// TensorParallel, above 1, shards the checkpoint over that many
	// in-process CPU ranks (docs/tensor-parallel.md); rows record it.
	TensorParallel int
	// OnRow, when set, sees each row as soon as it is measured (the CLI
	// appends it to the CSV then, so a run killed at a long prompt keeps
	// the points before it).
	OnRow func(Row)
	Log   io.Writer
}

func (o *DecodeOptions) defaults() {
	if o.Backend == "" {
		o.Backend = "auto"
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 100
	}
	if o.Repeat <= 0 {
		o.Repeat = 1
	}
	if len(o.PromptTokens) == 0 {
		o.PromptTokens = []int{0}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Context <= 0 {
		o.Context = 1024
	}
	if o.Steps <= 0 {
		o.Steps = 32
	}
	o.TensorParallel = max(o.TensorParallel, 1)
}

// blockSize is the KV page size the benchmark uses (the engine's default).
const blockSize = 16

// RunDecode benchmarks one model at each of o.PromptTokens and returns one
// row per length. A failure at any stage becomes FAIL:<stage> rows (for
// every length it prevents) rather than an early return, so a ladder
// keeps going and the CSV says what happened; the error is also returned.
func RunDecode(o DecodeOptions) ([]Row, error) {
	o.defaults()
	// Hardware starts as the host's CPU, so rows of a run whose backend
	// fails to start still say where it was tried.
	base := Row{Date: time.Now().UTC().Format(time.RFC3339), Hardware: Hardware(nil), Version: Version(), Build: BuildType(),
		MaxTokens: o.MaxTokens, TensorParallel: o.TensorParallel}
	var rows []Row
	emit := func(r Row) {
		rows = append(rows, r)
		if o.OnRow != nil {
			o.OnRow(r)
		}
	}
	fail := func(stage string, lengths []int, err error) ([]Row, error) {
		for _, n := range lengths {
			r := base
			setPrompt(&r, n)
			r.Status = FailStatus(stage)
			emit(r)
		}
		fmt.Fprintf(o.Log, "%s: FAIL:%s: %v\n", base.Model, stage, err)
		return rows, fmt.Errorf("%s: %s: %w", base.Model, stage, err)
	}

	// 1. The model's description.
	var cfg *weights.Config
	var stored, perToken int64 // weight bytes stored, and read by a decode token
	var tokSpec string
	var err error
	switch {
	case o.Profile != "" && o.Model != "":
		return nil, errors.New("give --model or --profile, not both")
	case o.Profile != "":
		base.Model = filepath.Base(o.Profile)
		base.ModelPath = "synthetic:" + base.Model
		var dir string
		if dir, err = synthetic.FindProfile(o.Profile, o.ProfilesDir); err == nil {
			cfg, err = weights.LoadConfig(dir)
		}
		if err != nil {
			return fail("config", o.PromptTokens, err)
		}
		plan, err := synthetic.Plan(cfg)
		if err != nil {
			return fail("config", o.PromptTokens, err)
		}
		stored = synthetic.TotalBytes(plan)
		perToken = synthetic.DecodeBytes(plan, cfg)
		tokSpec = o.Tokenizer
		if tokSpec == "" {
			if isFile(filepath.Join(dir, "tokenizer.json")) {
				tokSpec = dir
			} else if name, ok := synthetic.TokenizerName(cfg); ok {
				tokSpec = name
			} else {
				return fail("tokenizer", o.PromptTokens, fmt.Errorf("no tokenizer paired with model_type %q; pass --tokenizer", cfg.ModelType))
			}
		}
	case o.Model != "":
		base.Model = cmp.Or(o.ModelName, filepath.Base(filepath.Clean(o.Model)))
		if abs, err := filepath.Abs(o.Model); err == nil {
			base.ModelPath = abs
		} else {
			base.ModelPath = o.Model
		}
		if cfg, err = weights.LoadConfig(o.Model); err != nil {
			return fail("config", o.PromptTokens, err)
		}
		stored = checkpointBytes(o.Model)
		if plan, err := synthetic.Plan(cfg); err == nil {
			perToken = synthetic.DecodeBytes(plan, cfg)
		}
		tokSpec = o.Tokenizer
		if tokSpec == "" {
			tokSpec = o.Model
		}
	default:
		return nil, errors.New("give --model DIR or --profile NAME")
	}

	// 2. Backend.
	be, err := backend.New(o.Backend, backend.Options{Threads: o.Threads})
	if err != nil {
		return fail("backend", o.PromptTokens, err)
	}
	defer be.Close()
	base.Hardware = Hardware(be)
	if o.PrefillChunk <= 0 {
		o.PrefillChunk = DefaultPrefillChunk(backend.IsAccelerator(be))
	}
	if o.Warmup < 0 { // the ladder's default: a GPU's first run pays one-time costs, a CPU's does not
		o.Warmup = 0
		if backend.IsAccelerator(be) {
			o.Warmup = 1
		}
	}

	// 3. Tokenizer.
	tokDir, err := synthetic.FindTokenizer(tokSpec)
	var enc Encoder
	if err == nil {
		enc, err = LoadTokenizer(tokDir)
	}
	if err == nil {
		enc, err = usableTokenizer(enc, tokSpec, o.Tokenizer == "" && o.Profile != "", o.Log)
	}
	if err != nil {
		return fail("tokenizer", o.PromptTokens, err)
	}

	// 4. Memory estimate, before anything big is allocated. Each length
	// needs its prompt plus the generated tokens in the KV cache.
	est := estimate(cfg, be, stored, o.PrefillChunk).WithKVDtype(o.KVDtype)
	if o.MemLimit > 0 {
		est.Available, est.Source = o.MemLimit, "--mem-limit-gib"
	}
	fmt.Fprintf(o.Log, "%s on %s: %s\n", base.Model, base.Hardware, est)
	maxCtx := cfg.MaxPosition
	if maxCtx <= 0 {
		maxCtx = 4096
	}
	fits := map[int]bool{}
	var runnable []int
	for _, n := range o.PromptTokens {
		fits[n] = o.SkipMemCheck || est.Fits(contextFor(n, o.MaxTokens, maxCtx), 1)
		if fits[n] {
			runnable = append(runnable, n)
		}
	}
	skip := func(n int) Row {
		r := base
		setPrompt(&r, n)
		r.Status = StatusSkipOOM
		fmt.Fprintf(o.Log, "%s: %d-token prompt: SKIP: needs about %s\n", base.Model, n, gib(est.Need(contextFor(n, o.MaxTokens, maxCtx), 1)))
		return r
	}
	if len(runnable) == 0 {
		for _, n := range o.PromptTokens {
			emit(skip(n))
		}
		return rows, nil
	}

	// 5. Weights.
	t0 := time.Now()
	var m *model.Model
	if o.TensorParallel > 1 {
		m, err = loadParallel(o, be)
	} else if o.Profile != "" {
		fmt.Fprintf(o.Log, "%s: generating %s of synthetic weights (seed %d)\n", base.Model, gib(stored), o.Seed)
		var src *synthetic.Source
		m, src, err = synthetic.Build(cfg, be, synthetic.Options{Seed: o.Seed})
		if err == nil && len(src.Unpredicted()) > 0 {
			fmt.Fprintf(o.Log, "%s: warning: the model asked for tensors a real checkpoint lacks: %v\n", base.Model, src.Unpredicted())
		}
	} else {
		m, err = model.Load(o.Model, be, model.LoadOptions{})
	}
	if err != nil {
		return fail("load", o.PromptTokens, err)
	}
	if o.TensorParallel > 1 {
		defer m.Backend().Close() // the ranks' backends; be stays for the copy meter
	}
	fmt.Fprintf(o.Log, "%s: weights ready in %.1fs\n", base.Model, time.Since(t0).Seconds())
	// One short untimed pass per model, whatever --warmup says, so lazy
	// first-use work (kernel compilation on a GPU, buffer growth) never
	// lands in the first measured point.
	// The pass also runs one full prefill chunk when the prompts are long:
	// first use of the large-step paths (activation buffers sized for the
	// chunk, the GPU's GEMM and attention kernels) cost ~0.1 s, which had
	// halved the first 2048-token point of a ladder.
	if ids, err := enc.Encode(ShortPrompt, true); err == nil && len(ids) > 0 {
		longest := 0
		for _, n := range o.PromptTokens {
			if fits[n] {
				longest = max(longest, n)
			}
		}
		if n := min(longest, o.PrefillChunk); n > len(ids) {
			long := make([]int32, 0, n)
			for len(long) < n {
				long = append(long, ids[:min(len(ids), n-len(long))]...)
			}
			ids = long
		}
		if _, _, _, _, err := once(m, ids, 2, o.PrefillChunk, o.KVDtype); err != nil {
			fmt.Fprintf(o.Log, "%s: warm-up pass: %v\n", base.Model, err)
		}
	}

	if len(o.Batches) > 0 {
		_, err := runBatches(m, est, o, base, perToken, est.KVPerToken)
		return nil, err
	}
	var firstErr error
	lastN, lastMS := 0, 0.0 // the last measured point, for the time estimate
	for _, n := range o.PromptTokens {
		if !fits[n] {
			emit(skip(n))
			continue
		}
		r := base
		setPrompt(&r, n)
		if lastN > 0 && o.MaxPrefillSeconds > 0 && n > lastN {
			if est := lastMS / 1e3 * float64(n) * float64(n) / (float64(lastN) * float64(lastN)); est > o.MaxPrefillSeconds {
				r.Status = StatusSkipTime
				fmt.Fprintf(o.Log, "%s: %d-token prompt: SKIP: prefill estimated at %.0f s (from %.1f s at %d tokens, quadratic), over --max-prefill-seconds %g\n",
					base.Model, n, est, lastMS/1e3, lastN, o.MaxPrefillSeconds)
				emit(r)
				continue
			}
		}
		if err := runOne(m, enc, &r, o); err != nil {
			fmt.Fprintf(o.Log, "%s: %d-token prompt: %s: %v\n", base.Model, n, r.Status, err)
			firstErr = cmpOr(firstErr, fmt.Errorf("%s: %s: %w", base.Model, r.Status, err))
		} else if r.PromptTokens > 0 {
			lastN, lastMS = r.PromptTokens, r.PrefillMS
		}
		emit(r)
	}
	reportBandwidth(o.Log, be, rows, perToken, est.KVPerToken)
	return rows, firstErr
}

// loadParallel loads o.Model over o.TensorParallel CPU ranks sharing
// o.Threads, as mlxcel run does; be (the unsharded backend) only reports
// the hardware and the copy rate.
func loadParallel(o DecodeOptions, be backend.Backend) (*model.Model, error) {
	switch {
	case o.Profile != "":
		return nil, fmt.Errorf("--tensor-parallel %d with --profile is not supported yet (synthetic weights are built unsharded)", o.TensorParallel)
	case be.Name() != "cpu":
		return nil, fmt.Errorf("--tensor-parallel %d: the %s backend cannot run tensor parallelism yet; use --backend cpu", o.TensorParallel, be.Name())
	}
	return app.LoadParallelCPU(o.Model, o.TensorParallel, o.Threads, model.LoadOptions{})
}

// copyBytes is each buffer of the copy that decode bandwidth is compared
// with: far beyond any cache.
const copyBytes = 512 << 20

// reportBandwidth logs, for each measured row, the bytes a decode token
// read (weights, and the KV of the mean context) and the rate that makes,
// beside the backend's copy rate measured now, in the same run
// (backend.CopyMeter; nothing when the backend has none or perToken is
// unknown).
func reportBandwidth(log io.Writer, be backend.Backend, rows []Row, perToken, kvPerToken int64) {
	cm, ok := be.(backend.CopyMeter)
	if !ok || perToken <= 0 || !slices.ContainsFunc(rows, func(r Row) bool { return r.Status == StatusOK }) {
		return
	}
	copyGBps, err := cm.CopyGBps(copyBytes)
	if err != nil {
		fmt.Fprintf(log, "copy rate: %v\n", err)
		return
	}
	for _, r := range rows {
		if r.Status != StatusOK || r.GeneratedTokens == 0 {
			continue
		}
		ctx := float64(r.PromptTokens) + float64(r.GeneratedTokens-1)/2 // the mean context a decode token attends to
		kv := float64(kvPerToken) * ctx
		gbps := (float64(perToken) + kv) * r.DecodeTokS() / 1e9
		fmt.Fprintf(log, "%s: %d-token prompt: a decode token reads %.3f GB (weights %.3f, KV %.1f MB at %.0f tokens): %.0f GB/s, %.2f of the %s copy rate (%.0f GB/s, 2 x %d MiB, measured after the runs)\n",
			r.Model, r.PromptTokens, (float64(perToken)+kv)/1e9, float64(perToken)/1e9, kv/1e6, ctx, gbps, gbps/copyGBps, be.Name(), copyGBps, copyBytes>>20)
	}
}

// contextFor is the KV context a run of an n-token prompt (0: the short
// prompt, a dozen tokens) and maxTokens generated tokens occupies.
func contextFor(n, maxTokens, maxCtx int) int { return min(max(n, 16)+maxTokens, maxCtx) }

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func setPrompt(r *Row, target int) {
	if target > 0 {
		r.Prompt, r.PromptTargetLen = LongPromptLabel, target
	} else {
		r.Prompt = ShortPrompt
	}
}

// runOne measures one prompt length into r (Status ok or FAIL:<stage>).
func runOne(m *model.Model, enc Encoder, r *Row, o DecodeOptions) (err error) {
	stage := "tokenize"
	defer func() {
		// A kernel panic (bad shape, index out of range) fails this row,
		// not the whole ladder.
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
		if err != nil {
			r.Status = FailStatus(stage)
		}
	}()
	var prompt []int32
	if r.PromptTargetLen > 0 {
		prompt, err = LongPrompt(enc, r.PromptTargetLen)
	} else {
		prompt, err = enc.Encode(ShortPrompt, true)
	}
	if err != nil {
		return err
	}
	// The prompt and every generated token must fit in the context; the
	// prompt gives way (its real length is what the row records).
	maxTokens := min(o.MaxTokens, m.MaxContext()-1)
	if limit := m.MaxContext() - maxTokens; len(prompt) > limit {
		prompt = prompt[:limit]
	}
	if len(prompt) == 0 {
		return errors.New("empty prompt")
	}
	r.PromptTokens = len(prompt)
	r.MaxTokens = o.MaxTokens
	var prefill, decode []float64
	var idle backend.HostTime // summed over the measured runs
	for i := range o.Warmup + o.Repeat {
		runtime.GC() // keep a collection of the last run's garbage out of the timings
		p, d, id, st, err := once(m, prompt, maxTokens, o.PrefillChunk, o.KVDtype)
		if err != nil {
			stage = st
			return err
		}
		if i >= o.Warmup {
			prefill, decode = append(prefill, p), append(decode, d)
			idle.Add(id)
		}
	}
	r.PrefillMS, r.DecodeMS = mean(prefill), mean(decode)
	r.GeneratedTokens = maxTokens
	r.Status = StatusOK
	idleNote := ""
	if _, ok := m.Backend().(deviceIdler); ok && len(decode) > 0 {
		// Per decode step, not per gap: with steps queued ahead the device
		// drains only once or twice a run.
		steps := maxTokens * len(decode)
		us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(steps) }
		idleNote = fmt.Sprintf("; device idle between steps %.1f us a step (%d gaps in %d steps): before the step %.1f, inputs %.1f, recording %.1f, launch %.1f",
			us(idle.Total), idle.Gaps, steps, us(idle.Before), us(idle.Inputs), us(idle.Record), us(idle.Launch))
	}
	fmt.Fprintf(o.Log, "%s: prompt %d tokens: prefill %.1f ms (%.1f tok/s%s), decode %d tokens %.1f ms (%.2f tok/s%s%s)\n",
		r.Model, r.PromptTokens, r.PrefillMS, r.PrefillTokS(), spread(prefill), maxTokens, r.DecodeMS, r.DecodeTokS(), spread(decode), idleNote)
	return nil
}

// once prefills prompt through a fresh paged KV cache in chunks of chunk
// tokens, then decodes n tokens greedily one at a time (no EOS stop: the
// point is a fixed amount of work). It returns both durations in ms and,
// on error, the stage that failed.
func once(m *model.Model, prompt []int32, n, chunk int, dt backend.KVDtype) (prefillMS, decodeMS float64, idle backend.HostTime, stage string, err error) {
	total := len(prompt) + n
	nb := (total + blockSize - 1) / blockSize
	// Slot 0 of 1: recurrent layers (Qwen3.5) keep their state there.
	kv, err := m.Backend().NewKVStore(backend.KVSpec{NumBlocks: nb, BlockSize: blockSize, Layers: m.KVLayers(), Slots: 1, Dtype: dt})
	if err != nil {
		return 0, 0, idle, "prefill", err
	}
	defer backend.FreeKVStore(m.Backend(), kv) // the ladder's long points do not add up on the device
	blocks := make([]int32, nb)
	for i := range blocks {
		blocks[i] = int32(i)
	}
	batch := func(tokens []int32, pos int) *backend.Batch {
		b := &backend.Batch{Tokens: tokens, Seqs: []backend.SeqSlice{{Start: 0, Len: len(tokens), Blocks: blocks}}}
		for i := range tokens {
			b.Positions = append(b.Positions, int32(pos+i))
		}
		if pos+len(tokens) == len(prompt) || len(tokens) == 1 {
			// Only the last prompt token's logits (and each decode
			// token's) are needed, as in serving.
			b.LogitRows = []int{len(tokens) - 1}
		}
		return b
	}
	step := func(tokens []int32, pos int) ([]float32, error) { return m.Forward(batch(tokens, pos), kv) }
	m.Reserve(min(chunk, len(prompt)))
	t := time.Now()
	var logits []float32
	for pos := 0; pos < len(prompt); pos += chunk {
		end := min(pos+chunk, len(prompt))
		if logits, err = step(prompt[pos:end], pos); err != nil {
			return 0, 0, idle, "prefill", err
		}
	}
	if err := m.Backend().Sync(); err != nil {
		return 0, 0, idle, "prefill", err
	}
	prefillMS = ms(time.Since(t))
	if !finite(logits) {
		return 0, 0, idle, "prefill", errors.New("non-finite logits")
	}
	t = time.Now()
	// Greedy decode: only the token id comes back from the device, and
	// each step is queued before the previous one's id has arrived (its
	// token is a FeedToken the device resolves), so the host's work for
	// step i+1 overlaps the device's for step i. On backends without
	// asynchronous argmax the steps run one after the other.
	next := argmax(logits)
	idler, _ := m.Backend().(deviceIdler)
	if idler != nil {
		idler.DeviceIdle() // from here on
	}
	pending, err := m.ForwardArgmaxAsync(batch([]int32{next}, len(prompt)), kv)
	for i := 0; err == nil && i < n; i++ {
		var ahead backend.PendingIDs
		if i+1 < n {
			ahead, err = m.ForwardArgmaxAsync(batch([]int32{backend.FeedToken(0)}, len(prompt)+i+1), kv)
		}
		if err == nil {
			_, err = pending.Wait()
		}
		pending = ahead
	}
	if err != nil {
		return 0, 0, idle, "decode", err
	}
	if err := m.Backend().Sync(); err != nil {
		return 0, 0, idle, "decode", err
	}
	decodeMS = ms(time.Since(t))
	if idler != nil {
		idle = idler.DeviceIdle()
	}
	return prefillMS, decodeMS, idle, "", nil
}

// deviceIdler is a backend that reports how long its device waited for
// the host (the CUDA backend's DeviceIdle): the decode log gives it per
// step, the part of a step no kernel change can shorten.
type deviceIdler interface {
	DeviceIdle() backend.HostTime
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func argmax(row []float32) int32 {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return int32(best)
}

func finite(xs []float32) bool {
	for _, v := range xs {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return len(xs) > 0
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}

// spread formats the relative standard deviation of repeated timings.
func spread(xs []float64) string {
	if len(xs) < 2 {
		return ""
	}
	m := mean(xs)
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	sd := math.Sqrt(v / float64(len(xs)-1))
	return fmt.Sprintf(", ±%.1f%% over %d runs, min %.1f ms", 100*sd/m, len(xs), slices.Min(xs))
}

// cpuBenchChunk is the benchmarks' prefill chunk on the CPU (the CPU
// figures in docs/benchmark_results were measured with it; mlxcel serve
// uses engine.DefaultPrefillChunk there).
const cpuBenchChunk = 2048

// DefaultPrefillChunk is the benchmarks' prefill chunk on a backend: on
// a GPU the server's default, so the ladder measures what mlxcel serve
// does with a long prompt.
func DefaultPrefillChunk(accelerator bool) int {
	if accelerator {
		return engine.DefaultPrefillChunkGPU
	}
	return cpuBenchChunk
}
