package cpu

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolRunsEveryTaskOnce: every task of every job runs exactly once,
// with jobs back to back (helpers spinning) and after idle gaps (helpers
// parked), and with more helpers than GOMAXPROCS.
func TestPoolRunsEveryTaskOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		p := newPool(threads)
		for i := range 300 {
			n := 1 + i%17
			hits := make([]atomic.Int32, n)
			p.run(n, func(task int) { hits[task].Add(1) })
			for task := range hits {
				if c := hits[task].Load(); c != 1 {
					t.Fatalf("threads %d job %d: task %d ran %d times", threads, i, task, c)
				}
			}
			if i%100 == 99 {
				time.Sleep(5 * time.Millisecond) // long enough for helpers to park
			}
		}
		p.close()
	}
}

// TestPoolSingleProc: with one P, the caller must not wait forever for a
// helper that cannot run.
func TestPoolSingleProc(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := newPool(4)
	defer p.close()
	var sum atomic.Int64
	for range 50 {
		p.run(64, func(task int) { sum.Add(int64(task)) })
	}
	if want := int64(50 * 63 * 64 / 2); sum.Load() != want {
		t.Fatalf("sum %d, want %d", sum.Load(), want)
	}
}
