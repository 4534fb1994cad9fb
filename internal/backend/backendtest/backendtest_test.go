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
