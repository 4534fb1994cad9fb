//go:build linux

package cuda

import (
	"sort"
	"time"
	"unsafe"
)

// Kernel profiling: with profiling on, flush runs every launch on its own
// between two CUDA events (no graphs) and adds the device time to the
// kernel's total. It slows the run down; it is for finding where a step's
// device time goes, not for timing the step.

type profiler struct {
	on     bool
	events []uintptr
	byName map[uintptr]*profEntry
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
		if err := b.d.call("cuEventCreate", b.d.eventCreate, uintptr(unsafe.Pointer(&ev)), 0); err != nil {
			b.fail(err)
			return
		}
		b.prof.events = append(b.prof.events, ev)
	}
	for i := range ls {
		b.fail(b.d.call("cuEventRecord", b.d.eventRecord, b.prof.events[2*i], b.strm))
		b.fail(b.run(&ls[i]))
		b.fail(b.d.call("cuEventRecord", b.d.eventRecord, b.prof.events[2*i+1], b.strm))
	}
	if b.err != nil {
		return
	}
	b.fail(b.d.call("cuStreamSynchronize", b.d.streamSynchronize, b.strm))
	for i := range ls {
		var ms float32
		b.fail(b.d.call("cuEventElapsedTime", b.d.eventElapsed, uintptr(unsafe.Pointer(&ms)), b.prof.events[2*i], b.prof.events[2*i+1]))
		if e := b.prof.byName[ls[i].fn]; e != nil {
			e.calls++
			e.total += time.Duration(float64(ms) * 1e6)
		}
	}
}
