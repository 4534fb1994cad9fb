package bench

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	_ "github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model"
)

// The batch ladder on a tiny checkpoint: one row a batch size, rates from
// the step time, the bytes read growing with the batch's KV.
func TestBatchLadder(t *testing.T) {
	needTestdata(t)
	csvPath := filepath.Join(t.TempDir(), "batch.csv")
	if _, err := run(t, "decode", "--model", testdata+"tiny/llama-bf16", "--backend", "cpu", "--batch", "1,3,5",
		"--context", "24", "--steps", "4", "--csv", csvPath); err != nil {
		t.Fatal(err)
	}
	rows := readCSVAs(t, csvPath, BatchColumns)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	var lastRead float64
	for i, r := range rows {
		if r["status"] != StatusOK || r["batch"] != []string{"1", "3", "5"}[i] || r["context"] != "24" || r["steps"] != "4" {
			t.Fatalf("row %d: %v", i, r)
		}
		stepMS, _ := strconv.ParseFloat(r["step_ms"], 64)
		tokS, _ := strconv.ParseFloat(r["tok_s"], 64)
		read, _ := strconv.ParseFloat(r["read_gb_per_step"], 64)
		b, _ := strconv.Atoi(r["batch"])
		if stepMS <= 0 || tokS <= 0 || tokS < 0.9*float64(b)/(stepMS/1e3) || tokS > 1.1*float64(b)/(stepMS/1e3) {
			t.Errorf("row %d: step %v ms, %v tok/s for batch %d", i, stepMS, tokS, b)
		}
		if read < lastRead {
			t.Errorf("row %d: reads %v GB a step, fewer than the smaller batch's %v", i, read, lastRead)
		}
		lastRead = read
	}
}

// Batched decode steps are the same function as decoding each sequence
// alone: batchSteps' sequences, decoded one by one, give the ids the
// batched steps fed back.
func TestBatchStepsAreBatchInvariant(t *testing.T) {
	needTestdata(t)
	be, err := backend.New("cpu", backend.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	m, err := model.Load(testdata+"tiny/llama-bf16", be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The fp8 cache too: its codes do not depend on the batch.
	for _, dt := range []backend.KVDtype{backend.KVAuto, backend.KVFP8} {
		_, batched, err := batchSteps(m, 0, 3, 20, 4, 8, dt)
		if err != nil {
			t.Fatal(err)
		}
		if len(batched) != 3 {
			t.Fatalf("%d ids from a batch of 3", len(batched))
		}
		for s := range 3 {
			_, alone, err := batchSteps(m, s, 1, 20, 4, 8, dt)
			if err != nil {
				t.Fatal(err)
			}
			if alone[0] != batched[s] {
				t.Errorf("%s: sequence %d: %d decoded alone, %d in the batch", dt, s, alone[0], batched[s])
			}
		}
	}
	if _, _, err := batchSteps(m, 0, 1, m.MaxContext(), 4, 8, backend.KVAuto); err == nil {
		t.Error("a context past the model's was accepted")
	}
}
