package model

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend/cpu"
)

// TestBuffersReuse checks that scratch buffers keep their allocation and
// their row slice across steps of the same size, and are regrown (with a
// fresh slice) for larger steps.
func TestBuffersReuse(t *testing.T) {
	be := cpu.New(1)
	b := &buffers{m: map[bufKey]*buffer{}}
	x1 := b.get(be, "x", 1, 64)
	if x1.Rows() != 1 || x1.Cols() != 64 {
		t.Fatalf("got %dx%d, want 1x64", x1.Rows(), x1.Cols())
	}
	if x2 := b.get(be, "x", 1, 64); x2 != x1 {
		t.Errorf("a second one-row step got a new tensor")
	}
	if y := b.get(be, "x", 1, 32); y == x1 || y.Cols() != 32 {
		t.Errorf("another width shared the buffer")
	}
	big := b.get(be, "x", 5, 64)
	if big.Rows() != 5 {
		t.Fatalf("got %d rows, want 5", big.Rows())
	}
	if x3 := b.get(be, "x", 1, 64); x3 == x1 || x3.Rows() != 1 {
		t.Errorf("after growing, a one-row step got the old slice (or %d rows)", x3.Rows())
	}
}

// BenchmarkScratch is the lookups of a Llama-3.1-8B decode step's scratch
// activations (8 a layer, 32 layers), which run while a GPU waits.
func BenchmarkScratch(bm *testing.B) {
	be := cpu.New(1)
	b := &buffers{m: map[bufKey]*buffer{}}
	slots := []string{"h", "o", "q", "k", "v", "att", "gate", "up"}
	bm.ReportAllocs()
	for range bm.N {
		for range 32 {
			for _, s := range slots {
				b.get(be, s, 1, 4096)
			}
		}
	}
}
