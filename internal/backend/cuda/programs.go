//go:build linux

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/cudalib"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/kernels"
)

// cudaErrorNotFound is CUDA_ERROR_NOT_FOUND: a module without the kernel.
const cudaErrorNotFound = 500

// programImage is one compiled kernel program.
type programImage struct {
	img  []byte
	hit  bool          // from the disk cache
	took time.Duration // its compile (or cache read)
}

// compilePrograms compiles the programs in parallel, each through the
// disk cache: they are independent NVRTC compiles (as one program of
// everything the first start took 1.5-2.5 minutes). At most one compile
// runs a CPU; the programs table lists the longest first.
func compilePrograms(nv *cudalib.NVRTC, arch string, progs []kernels.Program) ([]programImage, error) {
	out := make([]programImage, len(progs))
	errs := make([]error, len(progs))
	sem := make(chan struct{}, max(runtime.NumCPU(), 1))
	var wg sync.WaitGroup
	for i, p := range progs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t := time.Now()
			o := &out[i]
			o.img, o.hit, errs[i] = nv.CompileCached(p.Source, p.Name, arch, []string{"--std=c++17"})
			o.took = time.Since(t)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("cuda: kernel program %s: %w", p.Name, errs[i])
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// loadKernels compiles (compilePrograms) and loads the kernel programs, a
// module each, and resolves every kernel in the module that defines it.
func (b *Backend) loadKernels() error {
	progs := kernels.Programs()
	t0 := time.Now()
	imgs, err := compilePrograms(b.nv, b.Arch, progs)
	if err != nil {
		return err
	}
	b.CacheHit = true
	b.ProgramTimes = map[string]time.Duration{}
	for i, p := range progs {
		b.CacheHit = b.CacheHit && imgs[i].hit
		if !imgs[i].hit {
			b.ProgramTimes[p.Name] = imgs[i].took
		}
	}
	if !b.CacheHit {
		b.CompileTime = time.Since(t0)
	}
	for i, p := range progs {
		var m uintptr
		if err := b.d.Call("cuModuleLoadData "+p.Name, b.d.ModuleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&imgs[i].img[0]))); err != nil {
			return err
		}
		cudalib.Keep(imgs[i].img)
		b.mods = append(b.mods, m)
	}
	// Resolve every kernel now, with the context current: ops look them up
	// while recording, possibly from another OS thread. The module that
	// defines a name owns it; the others answer not found.
	for _, name := range kernelNames() {
		cn := cudalib.CStr(name)
		var owners []string
		for i, m := range b.mods {
			var f uintptr
			r, _, _ := purego.SyscallN(b.d.ModuleGetFunction, uintptr(unsafe.Pointer(&f)), m, uintptr(unsafe.Pointer(&cn[0])))
			if uint32(r) == cudaErrorNotFound {
				continue
			}
			if err := b.d.Check("cuModuleGetFunction "+name+" in "+progs[i].Name, r); err != nil {
				return err
			}
			b.fns[name] = f
			owners = append(owners, progs[i].Name)
		}
		switch len(owners) {
		case 0:
			return fmt.Errorf("cuda: kernel %s is in none of the %d kernel programs (its file's program lost it: kernels.Programs)", name, len(progs))
		case 1:
		default:
			return fmt.Errorf("cuda: kernel %s is in the programs %s (kernels.Programs must compile it once)", name, strings.Join(owners, ", "))
		}
	}
	return nil
}

// unloadKernels unloads the modules (Close).
func (b *Backend) unloadKernels() {
	for _, m := range b.mods {
		_ = b.d.Call("cuModuleUnload", b.d.ModuleUnload, m)
	}
	b.mods = nil
}
