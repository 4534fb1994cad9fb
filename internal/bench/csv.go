// Package bench measures mlxcel: single-sequence prefill and decode
// throughput (bench decode), the prompt-length ladder over the
// representative model profiles with a CSV, a markdown summary and a chart
// (bench ladder), and a load generator for any OpenAI-compatible server
// (bench serve). The command-line front ends live in cli.go so that
// `mlxcel bench ...` and `mlxcel-bench-decode` share one set of flags.
package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
)

// Columns is the decode CSV header, exactly and in this order: rows from
// earlier runs and from the original project's scripts line up with it,
// so it never changes shape (add columns at the end only).
var Columns = []string{
	"model", "model_path", "prompt_tokens", "generated_tokens", "prefill_ms", "prefill_tok_s",
	"decode_ms", "decode_tok_s", "date", "hardware", "mlxcel_version", "build_type", "max_tokens",
	"prompt", "prompt_target_len", "status", "tensor_parallel",
}

// oldColumns is the header before tensor_parallel: such rows read as
// unsharded (1).
var oldColumns = Columns[:len(Columns)-1]

// Status values of a row.
const (
	StatusOK      = "ok"
	StatusSkipOOM = "SKIP:oom_estimate"
	// StatusSkipTime: the prefill would run past --max-prefill-seconds,
	// estimated from the model's previous point as growing with the square
	// of the prompt (attention's share grows so; an upper bound while the
	// linear part dominates).
	StatusSkipTime = "SKIP:time_estimate"
)

// FailStatus is the status of a row whose run failed at stage (config,
// backend, tokenizer, load, tokenize, prefill, decode).
func FailStatus(stage string) string { return "FAIL:" + stage }

// Row is one decode-benchmark result. Timings are zero (and written as
// empty cells) when Status is not ok.
type Row struct {
	Model, ModelPath string
	PromptTokens     int // length actually used (after the context cap)
	GeneratedTokens  int
	PrefillMS        float64
	DecodeMS         float64
	Date, Hardware   string
	Version, Build   string
	MaxTokens        int
	Prompt           string
	PromptTargetLen  int // 0 for the short prompt (written empty)
	Status           string
	TensorParallel   int // ranks the model was sharded over (0 and 1: unsharded, written 1)
}

// PrefillTokS is prompt tokens per second of prefill.
func (r Row) PrefillTokS() float64 { return rate(r.PromptTokens, r.PrefillMS) }

// DecodeTokS is generated tokens per second of decode.
func (r Row) DecodeTokS() float64 { return rate(r.GeneratedTokens, r.DecodeMS) }

func rate(n int, ms float64) float64 {
	if ms <= 0 {
		return 0
	}
	return float64(n) / (ms / 1000)
}

// Record renders the row in Columns order.
func (r Row) Record() []string {
	ok := r.Status == StatusOK
	num := func(v float64) string {
		if !ok {
			return ""
		}
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	count := func(n int) string {
		if !ok && n == 0 {
			return ""
		}
		return strconv.Itoa(n)
	}
	target := ""
	if r.PromptTargetLen > 0 {
		target = strconv.Itoa(r.PromptTargetLen)
	}
	gen := ""
	if ok {
		gen = strconv.Itoa(r.GeneratedTokens)
	}
	return []string{
		r.Model, r.ModelPath, count(r.PromptTokens), gen,
		num(r.PrefillMS), num(r.PrefillTokS()), num(r.DecodeMS), num(r.DecodeTokS()),
		r.Date, r.Hardware, r.Version, r.Build, strconv.Itoa(r.MaxTokens),
		r.Prompt, target, r.Status, strconv.Itoa(max(r.TensorParallel, 1)),
	}
}

// ParseRow reads a record written by Record (header order Columns), or
// by an earlier version without tensor_parallel (read as 1).
func ParseRow(rec []string) (Row, error) {
	if len(rec) != len(Columns) && len(rec) != len(oldColumns) {
		return Row{}, fmt.Errorf("row has %d fields, want %d", len(rec), len(Columns))
	}
	var r Row
	var err error
	atoi := func(s string) int {
		if s == "" || err != nil {
			return 0
		}
		var n int
		n, err = strconv.Atoi(s)
		return n
	}
	atof := func(s string) float64 {
		if s == "" || err != nil {
			return 0
		}
		var f float64
		f, err = strconv.ParseFloat(s, 64)
		return f
	}
	r.Model, r.ModelPath = rec[0], rec[1]
	r.PromptTokens = atoi(rec[2])
	r.GeneratedTokens = atoi(rec[3])
	r.PrefillMS = atof(rec[4])
	r.DecodeMS = atof(rec[6])
	r.Date, r.Hardware, r.Version, r.Build = rec[8], rec[9], rec[10], rec[11]
	r.MaxTokens = atoi(rec[12])
	r.Prompt = rec[13]
	r.PromptTargetLen = atoi(rec[14])
	r.Status = rec[15]
	r.TensorParallel = 1
	if len(rec) > 16 {
		r.TensorParallel = atoi(rec[16])
	}
	return r, err
}

// AppendCSV appends rows to path, writing the header first when the file
// is new or empty, so repeated runs accumulate in one file.
func AppendCSV(path string, rows []Row) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if err := WriteCSV(f, rows, st.Size() == 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteCSV writes rows (and the header when header is set).
func WriteCSV(w io.Writer, rows []Row, header bool) error {
	cw := csv.NewWriter(w)
	if header {
		if err := cw.Write(Columns); err != nil {
			return err
		}
	}
	for _, r := range rows {
		if err := cw.Write(r.Record()); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV parses a decode CSV, checking its header against Columns.
func ReadCSV(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cr := csv.NewReader(f)
	cr.FieldsPerRecord = -1 // a file begun before tensor_parallel has shorter rows above longer ones
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s: empty", path)
	}
	if h := recs[0]; !slices.Equal(h, Columns) && !slices.Equal(h, oldColumns) {
		return nil, fmt.Errorf("%s: header %v, want %v", path, h, Columns)
	}
	var rows []Row
	for i, rec := range recs[1:] {
		r, err := ParseRow(rec)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %v", path, i+2, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}
