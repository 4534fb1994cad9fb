package bench

import (
	"encoding/csv"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	_ "github.com/mlxcel/mlxcel/internal/backend/cpu"
)

const testdata = "../../../shared/testdata/"

// wantColumns pins the CSV header independently of the Columns variable:
// the issue fixes it exactly and in this order.
var wantColumns = []string{"model", "model_path", "prompt_tokens", "generated_tokens", "prefill_ms", "prefill_tok_s",
	"decode_ms", "decode_tok_s", "date", "hardware", "mlxcel_version", "build_type", "max_tokens", "prompt",
	"prompt_target_len", "status", "tensor_parallel"}

func needTestdata(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(testdata); err != nil {
		t.Fatalf("reference data missing (../shared/testdata, see README): %v", err)
	}
}

// readRecords parses a decode CSV into header-keyed maps, checking the
// header and field counts.
func readRecords(t *testing.T, path string) []map[string]string {
	t.Helper()
	return readCSVAs(t, path, wantColumns)
}

// readCSVAs is readRecords for a CSV whose header must be wantColumns.
func readCSVAs(t *testing.T, path string, wantColumns []string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 2 {
		t.Fatalf("%s: %d records", path, len(recs))
	}
	if !slices.Equal(recs[0], wantColumns) {
		t.Fatalf("header %v\nwant   %v", recs[0], wantColumns)
	}
	var out []map[string]string
	for _, rec := range recs[1:] {
		if len(rec) != len(wantColumns) {
			t.Fatalf("row has %d fields: %v", len(rec), rec)
		}
		if slices.Equal(rec, wantColumns) {
			t.Fatal("header repeated inside the file")
		}
		m := map[string]string{}
		for i, c := range wantColumns {
			m[c] = rec[i]
		}
		out = append(out, m)
	}
	return out
}

// checkOK asserts the invariants of a successful row.
func checkOK(t *testing.T, r map[string]string, maxTokens int) {
	t.Helper()
	if r["status"] != "ok" {
		t.Fatalf("status %q: %v", r["status"], r)
	}
	for _, c := range []string{"prompt_tokens", "generated_tokens", "prefill_ms", "prefill_tok_s", "decode_ms", "decode_tok_s"} {
		v, err := strconv.ParseFloat(r[c], 64)
		if err != nil || v <= 0 {
			t.Errorf("%s = %q, want a positive number", c, r[c])
		}
	}
	if r["generated_tokens"] != strconv.Itoa(maxTokens) || r["max_tokens"] != strconv.Itoa(maxTokens) {
		t.Errorf("generated %s / max %s, want %d", r["generated_tokens"], r["max_tokens"], maxTokens)
	}
	pt, _ := strconv.ParseFloat(r["prompt_tokens"], 64)
	pms, _ := strconv.ParseFloat(r["prefill_ms"], 64)
	ps, _ := strconv.ParseFloat(r["prefill_tok_s"], 64)
	if d := ps - pt/(pms/1000); d > 0.02*ps || d < -0.02*ps {
		t.Errorf("prefill_tok_s %v disagrees with prompt_tokens/prefill_ms (%v)", ps, pt/(pms/1000))
	}
	for _, c := range []string{"date", "hardware", "mlxcel_version", "build_type"} {
		if r[c] == "" {
			t.Errorf("%s empty", c)
		}
	}
	if !strings.HasPrefix(r["build_type"], "go1.") || !strings.Contains(r["build_type"], "CGO_ENABLED=") {
		t.Errorf("build_type %q", r["build_type"])
	}
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out strings.Builder
	err := Main(args, &out, testLog{t})
	return out.String(), err
}

// testLog sends progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The real stories260k checkpoint with its own tokenizer: the short
// prompt and a long one, appended to one CSV over two runs.
func TestDecodeStories260k(t *testing.T) {
	needTestdata(t)
	csvPath := filepath.Join(t.TempDir(), "bench.csv")
	model := testdata + "models/stories260k"
	for range 2 {
		out, err := run(t, "decode", "--model", model, "--prompt-tokens", "0,200", "--max-tokens", "12",
			"--warmup", "0", "--backend", "cpu", "--csv", csvPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "decode tok/s") || !strings.Contains(out, "stories260k") {
			t.Errorf("table:\n%s", out)
		}
	}
	rows := readRecords(t, csvPath)
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4 (two runs of two prompts)", len(rows))
	}
	abs, _ := filepath.Abs(model)
	for i, r := range rows {
		checkOK(t, r, 12)
		if r["model"] != "stories260k" || r["model_path"] != abs {
			t.Errorf("model %q path %q", r["model"], r["model_path"])
		}
		if i%2 == 0 {
			if r["prompt"] != ShortPrompt || r["prompt_target_len"] != "" {
				t.Errorf("short prompt row: prompt %q target %q", r["prompt"], r["prompt_target_len"])
			}
			// BOS + the short prompt in stories260k's small vocabulary.
			if n, _ := strconv.Atoi(r["prompt_tokens"]); n < 5 || n > 40 {
				t.Errorf("short prompt is %d tokens", n)
			}
		} else if r["prompt_target_len"] != "200" || r["prompt_tokens"] != "200" || r["prompt"] != LongPromptLabel {
			t.Errorf("long prompt row: %v", r)
		}
	}
}

// A prompt longer than the context is cut to fit the context with the
// generated tokens; the row records the length used and the target.
func TestDecodeContextCap(t *testing.T) {
	needTestdata(t)
	csvPath := filepath.Join(t.TempDir(), "bench.csv")
	if _, err := run(t, "decode", "--model", testdata+"models/stories260k", "--prompt-tokens", "2000", "--max-tokens", "12",
		"--warmup", "0", "--backend", "cpu", "--csv", csvPath); err != nil {
		t.Fatal(err)
	}
	r := readRecords(t, csvPath)[0]
	checkOK(t, r, 12)
	if r["prompt_tokens"] != "500" || r["prompt_target_len"] != "2000" { // 512-token context - 12
		t.Errorf("prompt_tokens %s target %s, want 500 and 2000", r["prompt_tokens"], r["prompt_target_len"])
	}
}

// tinyProfiles writes two small profiles (Qwen2- and Llama-shaped, 4-bit)
// whose 512-token vocabulary fits stories260k's tokenizer.
func tinyProfiles(t *testing.T) string {
	dir := t.TempDir()
	cfgs := map[string]string{
		"tiny-qwen2": `{"model_type":"qwen2","vocab_size":512,"hidden_size":128,"intermediate_size":256,"num_hidden_layers":2,
			"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":4096,"tie_word_embeddings":true,
			"quantization":{"group_size":64,"bits":4}}`,
		"tiny-llama": `{"model_type":"llama","vocab_size":512,"hidden_size":128,"intermediate_size":384,"num_hidden_layers":3,
			"num_attention_heads":4,"num_key_value_heads":4,"max_position_embeddings":4096,"tie_word_embeddings":false,
			"quantization":{"group_size":64,"bits":4}}`,
	}
	for name, c := range cfgs {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "config.json"), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDecodeProfile(t *testing.T) {
	needTestdata(t)
	csvPath := filepath.Join(t.TempDir(), "bench.csv")
	if _, err := run(t, "decode", "--profile", "tiny-qwen2", "--profiles-dir", tinyProfiles(t), "--tokenizer",
		testdata+"models/stories260k", "--prompt-tokens", "96", "--max-tokens", "6", "--warmup", "1", "--repeat", "2",
		"--prefill-chunk", "40", "--backend", "cpu", "--csv", csvPath); err != nil {
		t.Fatal(err)
	}
	r := readRecords(t, csvPath)[0]
	checkOK(t, r, 6)
	if r["model"] != "tiny-qwen2" || r["model_path"] != "synthetic:tiny-qwen2" || r["prompt_tokens"] != "96" {
		t.Errorf("row %v", r)
	}
}

// The representative small profile with its real (Qwen) tokenizer, as the
// CPU data point runs it; short prompt and few tokens to stay fast.
func TestDecodeQwenProfile(t *testing.T) {
	needTestdata(t)
	if testing.Short() {
		t.Skip("builds a 0.5B-parameter synthetic model")
	}
	csvPath := filepath.Join(t.TempDir(), "bench.csv")
	if _, err := run(t, "decode", "--profile", "qwen2.5-0.5b-4bit", "--max-tokens", "1", "--warmup", "0",
		"--backend", "cpu", "--csv", csvPath); err != nil {
		t.Fatal(err)
	}
	r := readRecords(t, csvPath)[0]
	checkOK(t, r, 1)
	// "Hello, how are you today?" is 7 tokens in the Qwen vocabulary (no BOS).
	if r["model_path"] != "synthetic:qwen2.5-0.5b-4bit" || r["prompt_tokens"] != "7" {
		t.Errorf("row %v", r)
	}
}

func TestDecodeSkipAndFail(t *testing.T) {
	needTestdata(t)
	dir := tinyProfiles(t)
	csvPath := filepath.Join(t.TempDir(), "bench.csv")
	// A memory limit below the weights: every length is skipped, which
	// is not an error.
	if _, err := run(t, "decode", "--profile", "tiny-llama", "--profiles-dir", dir, "--tokenizer", testdata+"models/stories260k",
		"--prompt-tokens", "0,64", "--max-tokens", "4", "--backend", "cpu", "--mem-limit-gib", "0.000001", "--csv", csvPath); err != nil {
		t.Fatal(err)
	}
	// An unknown profile fails at the config stage, with a row saying so.
	_, err := run(t, "decode", "--profile", "no-such-profile", "--profiles-dir", dir, "--prompt-tokens", "64",
		"--backend", "cpu", "--csv", csvPath)
	if err == nil || !strings.Contains(err.Error(), "no-such-profile") {
		t.Errorf("unknown profile: err %v", err)
	}
	// A missing tokenizer says where it looked and what to pass.
	_, err = run(t, "decode", "--profile", "tiny-llama", "--profiles-dir", dir, "--tokenizer", "no-such-tokenizer",
		"--backend", "cpu", "--csv", csvPath)
	if err == nil || !strings.Contains(err.Error(), "--tokenizer") {
		t.Errorf("missing tokenizer: err %v", err)
	}
	rows := readRecords(t, csvPath)
	var got []string
	for _, r := range rows {
		got = append(got, r["status"])
	}
	want := []string{"SKIP:oom_estimate", "SKIP:oom_estimate", "FAIL:config", "FAIL:tokenizer"}
	if !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	if rows[0]["prompt_target_len"] != "" || rows[1]["prompt_target_len"] != "64" || rows[1]["prefill_ms"] != "" {
		t.Errorf("skip rows %v", rows[:2])
	}
}

func TestLongPrompt(t *testing.T) {
	needTestdata(t)
	enc, err := LoadTokenizer(testdata + "tokenizers/qwen3")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 100, 1000, 5000} {
		a, err := LongPrompt(enc, n)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := LongPrompt(enc, n)
		if len(a) != n || !slices.Equal(a, b) {
			t.Errorf("n=%d: got %d tokens (deterministic: %v)", n, len(a), slices.Equal(a, b))
		}
	}
	if _, err := LongPrompt(enc, 0); err == nil {
		t.Error("zero length accepted")
	}
}

func TestFindTokenizerAndProfile(t *testing.T) {
	needTestdata(t)
	if d, err := synthetic.FindTokenizer("llama3_1"); err != nil || !isFile(filepath.Join(d, "tokenizer.json")) {
		t.Errorf("llama3_1: %q %v", d, err)
	}
	if d, err := synthetic.FindProfile("llama-3.1-8b-4bit", ""); err != nil || !isFile(filepath.Join(d, "config.json")) {
		t.Errorf("profile: %q %v", d, err)
	}
	if _, err := synthetic.FindProfile("nope", ""); err == nil || !strings.Contains(err.Error(), "--profiles-dir") {
		t.Errorf("missing profile: %v", err)
	}
}

func TestCSVRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.csv")
	in := []Row{
		{Model: "m", ModelPath: "synthetic:m", PromptTokens: 10, GeneratedTokens: 4, PrefillMS: 20, DecodeMS: 8, Date: "d",
			Hardware: "cpu, fast", Version: "v", Build: "b", MaxTokens: 4, Prompt: ShortPrompt, Status: StatusOK, TensorParallel: 2},
		{Model: "m", ModelPath: "synthetic:m", MaxTokens: 4, Prompt: LongPromptLabel, PromptTargetLen: 512, Status: StatusSkipOOM, TensorParallel: 1},
	}
	if err := AppendCSV(path, in[:1]); err != nil {
		t.Fatal(err)
	}
	if err := AppendCSV(path, in[1:]); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != in[0] || got[1] != in[1] {
		t.Errorf("round trip:\n%+v\nwant\n%+v", got, in)
	}
	if got[0].PrefillTokS() != 500 || got[0].DecodeTokS() != 500 {
		t.Errorf("rates %v %v", got[0].PrefillTokS(), got[0].DecodeTokS())
	}
}

// The shared mixtral tokenizer encodes nothing; a profile paired with it
// falls back to stories260k's (same SentencePiece family, ids < 32000)
// instead of failing, while an explicit --tokenizer that encodes nothing
// is an error.
func TestTokenizerFallback(t *testing.T) {
	needTestdata(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tiny-mixtral"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `{"model_type":"mixtral","vocab_size":32000,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":1,
		"num_attention_heads":4,"num_key_value_heads":2,"num_local_experts":4,"num_experts_per_tok":2,
		"max_position_embeddings":4096,"tie_word_embeddings":false,"quantization":{"group_size":64,"bits":4}}`
	if err := os.WriteFile(filepath.Join(dir, "tiny-mixtral", "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	csvPath := filepath.Join(t.TempDir(), "bench.csv")
	if _, err := run(t, "decode", "--profile", "tiny-mixtral", "--profiles-dir", dir, "--prompt-tokens", "64",
		"--max-tokens", "2", "--warmup", "0", "--backend", "cpu", "--csv", csvPath); err != nil {
		t.Fatal(err)
	}
	r := readRecords(t, csvPath)[0]
	checkOK(t, r, 2)
	if r["prompt_tokens"] != "64" {
		t.Errorf("prompt_tokens %s", r["prompt_tokens"])
	}
	if _, err := run(t, "decode", "--profile", "tiny-mixtral", "--profiles-dir", dir, "--tokenizer", "mixtral",
		"--max-tokens", "2", "--backend", "cpu"); err == nil || !strings.Contains(err.Error(), "no tokens") {
		t.Errorf("explicit empty tokenizer: %v", err)
	}
}

// TestDecodeTimeSkip: with a prefill time limit far below what the first
// point took, the next (longer) point is skipped with its own status, and
// the measured one stays ok.
func TestDecodeTimeSkip(t *testing.T) {
	needTestdata(t)
	dir := tinyProfiles(t)
	csvPath := filepath.Join(t.TempDir(), "bench.csv")
	if _, err := run(t, "decode", "--profile", "tiny-llama", "--profiles-dir", dir, "--tokenizer", testdata+"models/stories260k",
		"--prompt-tokens", "32,64", "--max-tokens", "2", "--backend", "cpu", "--max-prefill-seconds", "1e-9", "--csv", csvPath); err != nil {
		t.Fatal(err)
	}
	rows := readRecords(t, csvPath)
	if len(rows) != 2 || rows[0]["status"] != "ok" || rows[1]["status"] != StatusSkipTime || rows[1]["prefill_ms"] != "" {
		t.Errorf("rows %v", rows)
	}
}

// copyMeter is a backend with a known copy rate.
type copyMeter struct {
	backend.Backend
	gbps float64
}

func (c copyMeter) CopyGBps(int64) (float64, error) { return c.gbps, nil }
func (c copyMeter) Name() string                    { return "fake" }

// The bandwidth line: weights plus the KV of the mean context, times the
// decode rate, beside the copy rate; nothing for rows that did not run or
// backends that cannot measure a copy.
func TestReportBandwidth(t *testing.T) {
	rows := []Row{
		{Model: "m", PromptTokens: 100, GeneratedTokens: 11, DecodeMS: 100, Status: StatusOK}, // 110 tok/s
		{Model: "m", PromptTokens: 8192, Status: StatusSkipOOM},
	}
	var out strings.Builder
	// 1e9 weight bytes + 1e5 KV bytes x 105 tokens of mean context = 1.0105 GB a token (printed 1.010).
	reportBandwidth(&out, copyMeter{gbps: 222.31}, rows, 1e9, 1e5)
	want := "m: 100-token prompt: a decode token reads 1.010 GB (weights 1.000, KV 10.5 MB at 105 tokens): 111 GB/s, 0.50 of the fake copy rate (222 GB/s"
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Fatalf("got %q\nwant a line starting %q", out.String(), want)
	}
	out.Reset()
	reportBandwidth(&out, copyMeter{gbps: 1}, rows, 0, 1e5) // bytes a token unknown
	reportBandwidth(&out, nil, rows, 1e9, 1e5)              // no CopyMeter
	if out.Len() != 0 {
		t.Fatalf("unexpected report %q", out.String())
	}
}
