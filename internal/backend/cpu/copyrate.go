package cpu

import (
	"fmt"
	"time"
)

// CopyGBps is host memory's copy rate (backend.CopyMeter): two buffers of
// n bytes copied by the backend's threads in contiguous shares, counting
// bytes read plus bytes written, best of three timed runs after one
// untimed (which also faults the pages in).
func (b *Backend) CopyGBps(n int64) (float64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("cpu: copy of %d bytes", n)
	}
	src, dst := make([]byte, n), make([]byte, n)
	for i := 0; i < len(src); i += 4096 { // a write a page: real pages, not the shared zero page
		src[i] = 1
	}
	var best time.Duration
	for it := range 4 {
		t := time.Now()
		b.parallel(int(n), 1<<20, func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
		if d := time.Since(t); it > 0 && (best == 0 || d < best) {
			best = d
		}
	}
	if best <= 0 {
		return 0, fmt.Errorf("cpu: copy of %d bytes too fast to time", n)
	}
	return 2 * float64(n) / best.Seconds() / 1e9, nil
}
