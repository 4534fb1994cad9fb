package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bench decode --tensor-parallel 2 shards a tiny checkpoint over two CPU
// ranks, for the prompt ladder and the batch ladder, and says so in the
// rows' tensor_parallel column.
func TestDecodeTensorParallel(t *testing.T) {
	needTestdata(t)
	dir := t.TempDir()
	model := testdata + "tiny/qwen3-bf16"
	decodeCSV, batchCSV := filepath.Join(dir, "decode.csv"), filepath.Join(dir, "batch.csv")
	if _, err := run(t, "decode", "--model", model, "--max-tokens", "6", "--warmup", "0", "--backend", "cpu",
		"--tensor-parallel", "2", "--csv", decodeCSV); err != nil {
		t.Fatal(err)
	}
	for _, r := range readRecords(t, decodeCSV) {
		checkOK(t, r, 6)
		if r["tensor_parallel"] != "2" {
			t.Errorf("tensor_parallel %q, want 2", r["tensor_parallel"])
		}
	}
	if _, err := run(t, "decode", "--model", model, "--backend", "cpu", "--tensor-parallel", "2", "--batch", "1,2",
		"--context", "16", "--steps", "3", "--csv", batchCSV); err != nil {
		t.Fatal(err)
	}
	rows := readCSVAs(t, batchCSV, BatchColumns)
	if len(rows) != 2 {
		t.Fatalf("%d batch rows, want 2", len(rows))
	}
	for _, r := range rows {
		if r["status"] != StatusOK || r["tensor_parallel"] != "2" {
			t.Errorf("batch row %v", r)
		}
	}
	// Synthetic weights are built unsharded: refused, not run unsharded.
	if _, err := run(t, "decode", "--profile", "qwen2.5-0.5b-4bit", "--backend", "cpu", "--tensor-parallel", "2",
		"--max-tokens", "2"); err == nil || !strings.Contains(err.Error(), "with --profile is not supported") {
		t.Errorf("err %v, want a refusal of --profile", err)
	}
}

// A CSV begun before the tensor_parallel column still reads, its rows as
// unsharded, with rows appended since (one field more) below them.
func TestCSVReadsRowsWithoutTensorParallel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.csv")
	old := strings.Join(oldColumns, ",") + "\nm,/m,10,4,20.00,500.00,8.00,500.00,d,cpu,v,b,4,hi,,ok\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := AppendCSV(path, []Row{{Model: "m", ModelPath: "/m", MaxTokens: 4, Prompt: "hi", Status: StatusSkipOOM, TensorParallel: 4}}); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].TensorParallel != 1 || rows[0].DecodeMS != 8 || rows[1].TensorParallel != 4 {
		t.Fatalf("rows %+v", rows)
	}
}
