//go:build linux

package cuda

import (
	"runtime"
	"syscall"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/cudalib"
)

// TestArenaGrowthBindsTheContext: the arena grows from inside ops, on
// whatever OS thread the recording goroutine runs on, so its cuMemAlloc
// must follow a cuCtxSetCurrent on that thread. A fake driver (purego
// callbacks) answers CUDA_ERROR_INVALID_CONTEXT, as the driver did in
// s18d, when the context is not current on the calling thread.
func TestArenaGrowthBindsTheContext(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const ctx, invalidContext = 0xc7, 201
	current := map[int]bool{} // OS thread -> the context is current there
	setCurrent := purego.NewCallback(func(c uintptr) uintptr {
		current[syscall.Gettid()] = c == ctx
		return 0
	})
	memAlloc := purego.NewCallback(func(pp *uintptr, n uintptr) uintptr {
		if !current[syscall.Gettid()] {
			return invalidContext
		}
		*pp = 1 << 40
		return 0
	})
	b := hostOnlyBackend()
	b.d, b.ctx = &cudalib.Driver{CtxSetCurrent: setCurrent, MemAlloc: memAlloc}, ctx
	b.arena.off = b.arena.chunks[0].size // the step's chunk is full: the next scratch grows the arena
	clear(current)                       // a thread the context was never made current on
	p, err := b.arenaAlloc(1 << 20)
	if err != nil {
		t.Fatalf("arena growth on a thread without the context: %v", err)
	}
	if p != 1<<40 || len(b.arena.chunks) != 2 {
		t.Fatalf("arena grew to %#x (%d chunks), want a new chunk at %#x", p, len(b.arena.chunks), uintptr(1<<40))
	}
}
