package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The ladder over two small profiles at two lengths writes the CSV (exact
// columns, one row per profile x length), the markdown summary and the
// chart in both formats.
func TestLadder(t *testing.T) {
	needTestdata(t)
	out := t.TempDir()
	table, err := run(t, "ladder", "--profiles", "tiny-qwen2,tiny-llama", "--profiles-dir", tinyProfiles(t),
		"--tokenizer", testdata+"models/stories260k", "--lengths", "64,256", "--max-tokens", "4", "--backend", "cpu",
		"--out", out, "--name", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table, "tiny-llama") || !strings.Contains(table, "wrote ") {
		t.Errorf("stdout:\n%s", table)
	}
	rows := readRecords(t, filepath.Join(out, "tiny.csv"))
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	want := [][2]string{{"tiny-qwen2", "64"}, {"tiny-qwen2", "256"}, {"tiny-llama", "64"}, {"tiny-llama", "256"}}
	for i, r := range rows {
		checkOK(t, r, 4)
		if r["model"] != want[i][0] || r["prompt_tokens"] != want[i][1] || r["prompt_target_len"] != want[i][1] ||
			r["model_path"] != "synthetic:"+want[i][0] {
			t.Errorf("row %d: %v", i, r)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "tiny.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Synthetic weights", "| tiny-qwen2 | 64 |", "| tiny-llama | 256 |", "](tiny.svg)",
		"mlxcel bench ladder --profiles tiny-qwen2,tiny-llama"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("summary lacks %q:\n%s", s, md)
		}
	}
	svg, err := os.ReadFile(filepath.Join(out, "tiny.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"<svg", "tiny-qwen2", "tiny-llama", "prefill tok/s", "decode tok/s", "256"} {
		if !bytes.Contains(svg, []byte(s)) {
			t.Errorf("svg lacks %q", s)
		}
	}
	png, err := os.ReadFile(filepath.Join(out, "tiny.png"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("png: %v", err)
	}

	// A second run replaces the CSV rather than appending to it: the
	// summary and chart describe one run.
	if _, err := run(t, "ladder", "--profiles", "tiny-qwen2", "--profiles-dir", tinyProfiles(t),
		"--tokenizer", testdata+"models/stories260k", "--lengths", "64", "--max-tokens", "2", "--backend", "cpu",
		"--out", out, "--name", "tiny", "--quiet"); err != nil {
		t.Fatal(err)
	}
	if n := len(readRecords(t, filepath.Join(out, "tiny.csv"))); n != 1 {
		t.Errorf("second run left %d rows", n)
	}
}

func TestLadderFlags(t *testing.T) {
	if _, err := run(t, "ladder", "--lengths", "0"); err == nil {
		t.Error("zero length accepted")
	}
	if _, err := run(t, "ladder", "--lengths", "abc"); err == nil {
		t.Error("bad length accepted")
	}
	if _, err := run(t, "nope"); err == nil {
		t.Error("unknown subcommand accepted")
	}
}

// --render redraws a summary and chart from earlier CSVs without running.
func TestLadderRender(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	row := func(model string, n int, pre, dec float64) Row {
		return Row{Model: model, ModelPath: "synthetic:" + model, PromptTokens: n, GeneratedTokens: 100, PrefillMS: pre,
			DecodeMS: dec, Date: "2026-01-01T00:00:00Z", Hardware: "GPU X", Version: "v", Build: "b", MaxTokens: 100,
			Prompt: LongPromptLabel, PromptTargetLen: n, Status: StatusOK}
	}
	if err := AppendCSV(a, []Row{row("m1", 512, 50, 400), row("m1", 2048, 150, 420)}); err != nil {
		t.Fatal(err)
	}
	skip := row("m2", 2048, 0, 0)
	skip.Status = StatusSkipOOM
	if err := AppendCSV(b, []Row{row("m2", 512, 80, 900), skip}); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "ladder", "--render", a+","+b, "--out", dir, "--name", "all"); err != nil {
		t.Fatal(err)
	}
	rows := readRecords(t, filepath.Join(dir, "all.csv"))
	if len(rows) != 4 || rows[3]["status"] != StatusSkipOOM {
		t.Fatalf("rows %v", rows)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "all.md"))
	for _, s := range []string{"| m1 | 2048 | 150.0 | 13653.3 |", "| m2 | 2048 | | | | | SKIP:oom_estimate |", "GPU X",
		"gathered from earlier runs"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("summary lacks %q:\n%s", s, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "all.svg")); err != nil {
		t.Error(err)
	}
}
