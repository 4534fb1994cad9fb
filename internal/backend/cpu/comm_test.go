package cpu

import (
	"slices"
	"sync"
	"testing"
)

// TestGroupCollectives runs many rounds of both collectives on three
// ranks: every rank gets the rank-ordered sum and the side-by-side gather.
func TestGroupCollectives(t *testing.T) {
	const n, rounds = 3, 50
	comms := NewGroup(n)
	got := make([][]float32, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := New(1)
			x := b.NewTensor(2, 2).(*Tensor)
			g := b.NewTensor(2, n*n).(*Tensor)
			for i := range rounds {
				copy(x.Data(), []float32{float32(r), float32(i), 1, float32(r * r)})
				comms[r].AllReduce(x)
				// Widths 1, 3, 5: ranks may hold uneven vocabulary shards.
				s := b.NewTensor(2, 2*r+1).(*Tensor)
				for j := range s.Data() {
					s.Data()[j] = float32(10*r + j)
				}
				comms[r].AllGather(g, s)
			}
			got[r] = append(slices.Clone(x.Data()), g.Data()...)
		}()
	}
	wg.Wait()
	want := []float32{0 + 1 + 2, 3 * (rounds - 1), 3, 0 + 1 + 4,
		0, 10, 11, 12, 20, 21, 22, 23, 24,
		1, 13, 14, 15, 25, 26, 27, 28, 29}
	for r := range n {
		if !slices.Equal(got[r], want) {
			t.Errorf("rank %d: %v, want %v", r, got[r], want)
		}
	}
}
