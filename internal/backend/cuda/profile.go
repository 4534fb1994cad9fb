//go:build linux

package cuda

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"
	"unsafe"

	"github.com/mlxcel/mlxcel/internal/settings"
)

// Kernel profiling: with profiling on, flush runs every launch on its own
// between two CUDA events (no graphs) and adds the device time to the
// kernel's total. It slows the run down; it is for finding where a step's
// device time goes, not for timing the step.

type profiler struct {
	on     bool
	events []uintptr
	byName map[uintptr]*profEntry
	at     int // MLXCEL_CUDA_PROFILE: the step (1-based) to profile; 0: none
	steps  int // steps begun
}

type profEntry struct {
	name  string
	calls int
	total time.Duration
}

// SetProfile turns per-kernel profiling on or off and clears the totals.
func (b *Backend) SetProfile(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setProfileLocked(on)
}

func (b *Backend) setProfileLocked(on bool) {
	b.prof.on = on
	b.prof.byName = map[uintptr]*profEntry{}
	names := map[uintptr]string{fnGemm: "cublas_gemm"}
	for n, f := range b.fns {
		names[f] = n
	}
	for f, n := range names {
		b.prof.byName[f] = &profEntry{name: n}
	}
}

// ProfileEntry is one kernel's share of the profiled device time.
type ProfileEntry struct {
	Name  string
	Calls int
	Total time.Duration
}

// ProfileReport returns the kernels by total device time, largest first.
func (b *Backend) ProfileReport() []ProfileEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.profileReportLocked()
}

func (b *Backend) profileReportLocked() []ProfileEntry {
	var out []ProfileEntry
	for _, e := range b.prof.byName {
		if e.calls > 0 {
			out = append(out, ProfileEntry{e.name, e.calls, e.total})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Total > out[j].Total })
	return out
}

// runProfiled runs ls one by one between events.
func (b *Backend) runProfiled(ls []launch) {
	for len(b.prof.events) < 2*len(ls) {
		var ev uintptr
		if err := b.d.Call("cuEventCreate", b.d.EventCreate, uintptr(unsafe.Pointer(&ev)), 0); err != nil {
			b.fail(err)
			return
		}
		b.prof.events = append(b.prof.events, ev)
	}
	for i := range ls {
		b.fail(b.d.Call("cuEventRecord", b.d.EventRecord, b.prof.events[2*i], b.strm))
		b.fail(b.run(&ls[i]))
		b.fail(b.d.Call("cuEventRecord", b.d.EventRecord, b.prof.events[2*i+1], b.strm))
	}
	if b.err != nil {
		return
	}
	b.fail(b.d.Call("cuStreamSynchronize", b.d.StreamSynchronize, b.strm))
	for i := range ls {
		var ms float32
		b.fail(b.d.Call("cuEventElapsedTime", b.d.EventElapsed, uintptr(unsafe.Pointer(&ms)), b.prof.events[2*i], b.prof.events[2*i+1]))
		if e := b.prof.byName[ls[i].fn]; e != nil {
			e.calls++
			e.total += time.Duration(float64(ms) * 1e6)
		}
	}
}

// profileStep runs at each BeginStep (the previous step flushed): with
// MLXCEL_CUDA_PROFILE=N, step N of the process runs profiled and its
// report goes to stderr when step N+1 begins. It lets `mlxcel bench
// decode` or a server show where a model's step time goes.
func (b *Backend) profileStep() {
	if b.prof.at == 0 {
		return
	}
	b.prof.steps++
	switch b.prof.steps {
	case b.prof.at:
		b.setProfileLocked(true)
	case b.prof.at + 1:
		rep := b.profileReportLocked()
		var total time.Duration
		for _, e := range rep {
			total += e.Total
		}
		fmt.Fprintf(os.Stderr, "cuda profile of step %d (kernels run one by one, without graphs): %.1f us\n",
			b.prof.at, float64(total.Nanoseconds())/1e3)
		for _, e := range rep {
			fmt.Fprintf(os.Stderr, "  %-24s %5d calls %10.1f us %5.1f%%\n", e.Name, e.Calls,
				float64(e.Total.Nanoseconds())/1e3, 100*e.Total.Seconds()/total.Seconds())
		}
		b.setProfileLocked(false)
	}
}

func profileAt() int {
	n, _ := strconv.Atoi(settings.Get("MLXCEL_CUDA_PROFILE"))
	return max(n, 0)
}
