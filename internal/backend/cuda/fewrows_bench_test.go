//go:build linux

package cuda

import (
	"fmt"
	"strings"
	"testing"
)

// TestBenchFewRows times the 1-32 row products (the one-row GEMV, and
// qmma4, the batch-2 to batch-32 decode steps' path) on the Llama-3.1-8B
// shapes, with qmm4 ("qmm17", bf16 activations) beside the default at 17-32
// rows, interleaved shape by shape.
func TestBenchFewRows(t *testing.T) {
	o := benchEnabled(t)
	b := newOrSkip(t)
	defer b.Close()
	copyGB := copyRate(t, b, o)
	def := b.Tuning
	for _, rows := range []int{1, 2, 8, 16, 24, 32} {
		shapes := [][2]int{{4096, 4096}, {14336, 4096}, {4096, 14336}}
		if rows == 1 {
			shapes = append(shapes, [2]int{1024, 4096}, [2]int{128256, 4096})
		}
		vs := []string{""}
		if rows > 16 {
			vs = append(vs, "qmm17")
		}
		for _, s := range shapes {
			for _, v := range vs {
				b.Tuning = def
				if v == "qmm17" {
					b.Tuning.QMMMinRows = 17
				}
				d, wb := timeLinear(t, b, "q4g64", rows, s[0], s[1])
				cfg := "q4g64"
				if rows > 1 {
					cfg += "-mma" + strings.TrimSuffix("_"+v, "_")
				}
				gbps := float64(wb) / d.Seconds() / 1e9
				o.add("linear", cfg, rows, fmt.Sprintf("%dx%d", s[0], s[1]), float64(d.Nanoseconds())/1e3, gbps, gbps/copyGB, "")
			}
		}
	}
	b.Tuning = def
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	o.print()
}
