package backendtest_test

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/backendtest"
	_ "github.com/mlxcel/mlxcel/internal/backend/cpu"
)

// TestHarnessOnCPU runs the suite with the CPU backend on both sides: it
// proves the harness itself (inputs, poisoning, comparison) on any machine.
func TestHarnessOnCPU(t *testing.T) {
	b, err := backend.New("cpu", backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.Run(t, b)
}

// TestHarnessKVOnCPU runs the attention cases with bf16 and fp8 KV stores
// on both sides (RunKV), as a GPU backend runs them against the CPU.
func TestHarnessKVOnCPU(t *testing.T) {
	b, err := backend.New("cpu", backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []backend.KVDtype{backend.KVBF16, backend.KVFP8} {
		t.Run(string(d), func(t *testing.T) { backendtest.RunKV(t, b, d) })
	}
}
