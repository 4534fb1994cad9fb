//go:build linux

package cuda

import "testing"

// TestTensorClass: 256-byte multiples up to 1 MiB, then eighths of a power
// of two, never smaller than asked and at most 12.5% larger; a few classes
// cover every size of a range (the pool's reuse across step sizes).
func TestTensorClass(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 256}, {256, 256}, {257, 512}, {1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + 1<<17}, {3 << 20, 3 << 20}, {3<<20 + 5, 3<<20 + 1<<18}, {100 << 20, 104 << 20}} {
		if got := tensorClass(c.n); got != c.want {
			t.Errorf("tensorClass(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	classes := map[int]bool{}
	for n := 1 << 21; n <= 1<<24; n += 4096 {
		c := tensorClass(n)
		if c < n || float64(c) > 1.125*float64(n) {
			t.Fatalf("tensorClass(%d) = %d", n, c)
		}
		classes[c] = true
	}
	if len(classes) != 25 { // 2^21 .. 2^24: 8 classes an octave, both ends
		t.Errorf("%d classes between 2 and 16 MiB", len(classes))
	}
}
