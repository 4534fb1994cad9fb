package bench

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/model"
)

// The batch ladder (bench decode --batch): decode steps only, as
// llama-batched-bench measures them. Batch sequences each hold Context
// tokens of KV (prefilled untimed), then Steps greedy decode steps of all
// of them run back to back, each queued before the previous step's ids are
// read. A row gives the step time, the aggregate rate, the bytes a step
// reads (the weights once, every sequence's KV; for MoE a lower bound) and
// the bandwidth that makes beside the backend's copy rate measured in the
// same run.

// BatchColumns is the batch ladder's CSV header (add columns at the end only).
var BatchColumns = []string{"model", "batch", "context", "steps", "step_ms", "tok_s", "read_gb_per_step", "gb_s",
	"copy_gb_s", "ratio_to_copy", "date", "hardware", "mlxcel_version", "status", "tensor_parallel"}

// BatchRow is one point of the batch ladder.
type BatchRow struct {
	Model                   string
	Batch, Context, Steps   int
	StepMS                  float64
	ReadBytes               int64 // per step: weights + KV of every sequence
	CopyGBps                float64
	Date, Hardware, Version string
	Status                  string
	TensorParallel          int // ranks the model was sharded over (written 1 when unsharded)
}

// TokS is the aggregate decode rate: Batch tokens a step.
func (r BatchRow) TokS() float64 { return rate(r.Batch, r.StepMS) }

// GBps is the bandwidth a step's reads make.
func (r BatchRow) GBps() float64 {
	if r.StepMS <= 0 {
		return 0
	}
	return float64(r.ReadBytes) / (r.StepMS / 1e3) / 1e9
}

// Record renders the row in BatchColumns order.
func (r BatchRow) Record() []string {
	f := func(v float64, prec int) string {
		if r.Status != StatusOK {
			return ""
		}
		return strconv.FormatFloat(v, 'f', prec, 64)
	}
	ratio := 0.0
	if r.CopyGBps > 0 {
		ratio = r.GBps() / r.CopyGBps
	}
	return []string{r.Model, strconv.Itoa(r.Batch), strconv.Itoa(r.Context), strconv.Itoa(r.Steps), f(r.StepMS, 3), f(r.TokS(), 1),
		f(float64(r.ReadBytes)/1e9, 3), f(r.GBps(), 1), f(r.CopyGBps, 1), f(ratio, 3), r.Date, r.Hardware, r.Version, r.Status,
		strconv.Itoa(max(r.TensorParallel, 1))}
}

// AppendBatchCSV appends rows to path, writing the header when the file is new.
func AppendBatchCSV(path string, rows []BatchRow) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if st.Size() == 0 {
		if err := w.Write(BatchColumns); err != nil {
			return err
		}
	}
	for _, r := range rows {
		if err := w.Write(r.Record()); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}

// PrintBatchTable writes batch rows as an aligned table.
func PrintBatchTable(w io.Writer, rows []BatchRow) {
	fmt.Fprintf(w, "%20s %6s %8s %10s %10s %10s %8s %7s  %s\n", "model", "batch", "context", "step ms", "tok/s", "GB/step", "GB/s", "x copy", "status")
	for _, r := range rows {
		ratio := 0.0
		if r.CopyGBps > 0 {
			ratio = r.GBps() / r.CopyGBps
		}
		fmt.Fprintf(w, "%20s %6d %8d %10.3f %10.1f %10.3f %8.1f %7.3f  %s\n", r.Model, r.Batch, r.Context, r.StepMS, r.TokS(),
			float64(r.ReadBytes)/1e9, r.GBps(), ratio, r.Status)
	}
}

// runBatches measures each batch size of o.Batches at o.Context tokens of
// context; perToken and kvPerToken are the weight bytes a decode step
// reads and the KV bytes of one token.
func runBatches(m *model.Model, est Estimate, o DecodeOptions, base Row, perToken, kvPerToken int64) ([]BatchRow, error) {
	var rows []BatchRow
	var firstErr error
	for _, b := range o.Batches {
		r := BatchRow{Model: base.Model, Batch: b, Context: o.Context, Steps: o.Steps, Date: base.Date, Hardware: base.Hardware,
			Version: base.Version, Status: StatusOK, TensorParallel: base.TensorParallel}
		if need := b * (o.Context + batchWarmSteps + o.Steps + 1); !o.SkipMemCheck && !est.Fits(need, b) {
			r.Status = StatusSkipOOM
			fmt.Fprintf(o.Log, "%s: batch %d: SKIP: needs about %s\n", base.Model, b, gib(est.Need(need, b)))
			rows = append(rows, r)
			continue
		}
		stepMS, _, err := batchSteps(m, 0, b, o.Context, o.Steps, o.PrefillChunk, o.KVDtype)
		if err != nil {
			r.Status = FailStatus("decode")
			firstErr = cmpOr(firstErr, fmt.Errorf("batch %d: %w", b, err))
			fmt.Fprintf(o.Log, "%s: batch %d: %v\n", base.Model, b, err)
		} else {
			r.StepMS = stepMS
			// A step reads the weights once (for MoE the experts of one
			// token: a lower bound when a batch's tokens choose more) and
			// each sequence's KV at its mean context over the steps.
			ctx := int64(o.Context) + int64(o.Steps)/2
			r.ReadBytes = perToken + int64(b)*ctx*kvPerToken
		}
		rows = append(rows, r)
	}
	if cm, ok := m.Backend().(backend.CopyMeter); ok {
		if gbps, err := cm.CopyGBps(copyBytes); err == nil {
			for i := range rows {
				rows[i].CopyGBps = gbps
			}
		}
	}
	for _, r := range rows {
		if o.OnBatchRow != nil {
			o.OnBatchRow(r)
		}
	}
	return rows, firstErr
}

// batchWarmSteps are the untimed decode steps before the measured ones:
// the first launches directly and the second captures a graph on a GPU.
const batchWarmSteps = 3

// batchSteps prefills n sequences of ctx tokens (untimed, in chunks of
// chunk tokens, one sequence at a time; sequence first+s's prompt is a
// fixed function of its number) and returns the mean time of steps greedy
// decode steps of all n, in ms, and the ids the last step chose.
func batchSteps(m *model.Model, first, n, ctx, steps, chunk int, dt backend.KVDtype) (float64, []int32, error) {
	if n < 1 || ctx < 1 || steps < 1 {
		return 0, nil, errors.New("batch, context and steps must be positive")
	}
	total := ctx + batchWarmSteps + steps + 1
	if total > m.MaxContext() {
		return 0, nil, fmt.Errorf("context %d + %d steps exceeds the model's %d", ctx, steps, m.MaxContext())
	}
	per := (total + blockSize - 1) / blockSize
	// A slot per sequence: recurrent layers (Qwen3.5) keep their state there.
	kv, err := m.Backend().NewKVStore(backend.KVSpec{NumBlocks: n * per, BlockSize: blockSize, Layers: m.KVLayers(), Slots: n, Dtype: dt})
	if err != nil {
		return 0, nil, err
	}
	defer backend.FreeKVStore(m.Backend(), kv) // each point's KV goes back before the next is allocated
	tables := make([][]int32, n)
	for s := range tables {
		for j := range per {
			tables[s] = append(tables[s], int32(s*per+j))
		}
	}
	vocab := m.Vocab()
	m.Reserve(max(min(chunk, ctx), n))
	next := make([]int32, n)
	for s := range n { // distinct prompts: no sequence's KV equals another's
		for pos := 0; pos < ctx; pos += chunk {
			end := min(pos+chunk, ctx)
			b := &backend.Batch{Seqs: []backend.SeqSlice{{Start: 0, Len: end - pos, Blocks: tables[s], Slot: s}}}
			for i := pos; i < end; i++ {
				b.Tokens = append(b.Tokens, int32((i*31+(first+s)*7+1)%vocab))
				b.Positions = append(b.Positions, int32(i))
			}
			if end == ctx {
				b.LogitRows = []int{end - pos - 1}
			}
			logits, err := m.Forward(b, kv)
			if err != nil {
				return 0, nil, err
			}
			if end == ctx {
				next[s] = argmax(logits)
			}
		}
	}
	step := func(i int, feed bool) (backend.PendingIDs, error) {
		b := &backend.Batch{}
		for s := range n {
			tok := next[s]
			if feed {
				tok = backend.FeedToken(s)
			}
			b.Seqs = append(b.Seqs, backend.SeqSlice{Start: s, Len: 1, Blocks: tables[s], Slot: s})
			b.Tokens = append(b.Tokens, tok)
			b.Positions = append(b.Positions, int32(ctx+i))
			b.LogitRows = append(b.LogitRows, s)
		}
		return m.ForwardArgmaxAsync(b, kv)
	}
	pending, err := step(0, false)
	var t0 time.Time
	for i := 1; err == nil && i <= batchWarmSteps+steps; i++ {
		if i == batchWarmSteps+1 {
			if _, err = pending.Wait(); err != nil { // the timed steps start with nothing queued
				break
			}
			if err = m.Backend().Sync(); err != nil {
				break
			}
			t0 = time.Now()
			pending, err = step(i, true)
			continue
		}
		var ahead backend.PendingIDs
		if ahead, err = step(i, true); err == nil {
			_, err = pending.Wait()
		}
		pending = ahead
	}
	var ids []int32
	if err == nil {
		ids, err = pending.Wait()
	}
	if err == nil {
		err = m.Backend().Sync()
	}
	if err != nil {
		return 0, nil, err
	}
	return ms(time.Since(t0)) / float64(steps), ids, nil
}

// BatchStepMS is the mean time in ms of steps greedy decode steps of n
// sequences holding ctx tokens of KV each (prefilled untimed in chunks of
// chunk tokens), on a model already loaded: backend tests time the same
// steps as `bench decode --batch` under tunings of their own.
func BatchStepMS(m *model.Model, n, ctx, steps, chunk int) (float64, error) {
	ms, _, err := batchSteps(m, 0, n, ctx, steps, chunk, backend.KVAuto)
	return ms, err
}
