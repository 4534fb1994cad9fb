//go:build linux

package cuda

import (
	"time"
	"unsafe"
)

// Timer measures device time between two points of the stream with CUDA
// events (for benchmarks and the step profiler).
type Timer struct {
	b          *Backend
	start, end uintptr
}

// NewTimer creates a pair of events.
func (b *Backend) NewTimer() *Timer {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	t := &Timer{b: b}
	b.fail(b.d.Call("cuEventCreate", b.d.EventCreate, uintptr(unsafe.Pointer(&t.start)), 0))
	b.fail(b.d.Call("cuEventCreate", b.d.EventCreate, uintptr(unsafe.Pointer(&t.end)), 0))
	return t
}

// Start runs what is recorded so far, then marks the start.
func (t *Timer) Start() { t.mark(t.start) }

// Stop runs what is recorded, marks the end, waits and returns the time
// between the marks.
func (t *Timer) Stop() time.Duration {
	t.mark(t.end)
	b := t.b
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	b.fail(b.d.Call("cuEventSynchronize", b.d.EventSynchronize, t.end))
	var ms float32
	b.fail(b.d.Call("cuEventElapsedTime", b.d.EventElapsed, uintptr(unsafe.Pointer(&ms)), t.start, t.end))
	return time.Duration(float64(ms) * 1e6)
}

// Close destroys the events.
func (t *Timer) Close() {
	b := t.b
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	_ = b.d.Call("cuEventDestroy", b.d.EventDestroy, t.start)
	_ = b.d.Call("cuEventDestroy", b.d.EventDestroy, t.end)
}

func (t *Timer) mark(ev uintptr) {
	b := t.b
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	b.flush()
	b.fail(b.d.Call("cuEventRecord", b.d.EventRecord, ev, b.strm))
}

// SetGraphs turns graph capture and replay on or off (benchmarks compare).
func (b *Backend) SetGraphs(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.graphs.on = on
}
