//go:build linux

package cuda

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend/cuda/cudalib"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/kernels"
)

func TestNVRTCArch(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		want         string
	}{{9, 0, "sm_90a"}, {8, 0, "sm_80"}, {8, 9, "sm_89"}, {10, 0, "sm_100"}, {12, 0, "sm_120"}} {
		if got := nvrtcArch(c.major, c.minor); got != c.want {
			t.Errorf("nvrtcArch(%d, %d) = %q, want %q", c.major, c.minor, got, c.want)
		}
	}
}

// checkOwners checks that every kernel New resolves is defined by exactly
// one program and that the programs define nothing else. defs: program
// name -> the kernels its image (or preprocessed source) defines.
func checkOwners(t *testing.T, defs map[string][]string) {
	t.Helper()
	owner := map[string]string{}
	for _, p := range kernels.Programs() {
		if len(defs[p.Name]) == 0 {
			t.Errorf("program %s defines no kernel", p.Name)
		}
		for _, n := range defs[p.Name] {
			if o, dup := owner[n]; dup {
				t.Errorf("kernel %s defined by %s and %s", n, o, p.Name)
			}
			owner[n] = p.Name
		}
	}
	names := kernelNames()
	for _, n := range names {
		if _, ok := owner[n]; !ok {
			t.Errorf("kernel %s is in no program", n)
		}
	}
	for n, p := range owner {
		if !slices.Contains(names, n) {
			t.Errorf("program %s defines %s, which kernelNames does not list", p, n)
		}
	}
	if len(owner) < 300 {
		t.Errorf("only %d kernels in the programs", len(owner))
	}
}

// TestKernelProgramsSplit checks on the preprocessed sources (no compiler
// needed) that the programs split the kernels, each defined by exactly
// one, and that the programs' names (their cache files') are distinct.
func TestKernelProgramsSplit(t *testing.T) {
	progs := kernels.Programs()
	if len(progs) < 8 {
		t.Fatalf("only %d programs", len(progs))
	}
	defs := map[string][]string{}
	for _, p := range progs {
		if _, dup := defs[p.Name]; dup {
			t.Errorf("two programs named %s", p.Name)
		}
		for _, m := range kernelEntry.FindAllStringSubmatch(preprocessed(t, p.Source), -1) {
			defs[p.Name] = append(defs[p.Name], m[1])
		}
	}
	checkOwners(t, defs)
}

// TestKernelProgramsCompile compiles every program with NVRTC for sm_90a
// as New does (in parallel, through a fresh cache), checks the kernels
// each cubin defines, and logs each program's compile time: the first
// start's wait is about the longest one when the CPUs are enough. No GPU
// needed: NVRTC from the usual search, or under CUDA_ROOT (the unpacked
// toolkit of scripts/kernel-check.sh).
func TestKernelProgramsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every kernel (minutes of CPU)")
	}
	if root := os.Getenv("CUDA_ROOT"); root != "" {
		t.Setenv("MLXCEL_NVRTC_LIB", filepath.Join(root, "usr/lib/x86_64-linux-gnu"))
	}
	nv, err := cudalib.LoadNVRTC()
	if err != nil {
		t.Skipf("no NVRTC here (set CUDA_ROOT to an unpacked toolkit to run it): %v", err)
	}
	t.Setenv("MLXCEL_CUDA_CACHE", t.TempDir())
	progs := kernels.Programs()
	cpu0, t0 := cpuTime(), time.Now()
	imgs, err := compilePrograms(nv, "sm_90a", progs)
	wall, cpu := time.Since(t0), cpuTime()-cpu0
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string][]string{}
	var sum, longest time.Duration
	for i, p := range progs {
		if imgs[i].hit {
			t.Errorf("%s: cache hit in a fresh cache", p.Name)
		}
		sum += imgs[i].took
		longest = max(longest, imgs[i].took)
		if defs[p.Name], err = cubinKernels(imgs[i].img); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		t.Logf("%-22s %6.1f s  %3d kernels", p.Name, imgs[i].took.Seconds(), len(defs[p.Name]))
	}
	// CPU time over wall time is how many compiles NVRTC really ran at
	// once: near 1 where it serialises them.
	t.Logf("nvrtc %d.%d, %d CPUs: %.1f s wall, %.1f s CPU (%.1f compiles at once); longest program %.1f s, all %.1f s",
		nv.Major, nv.Minor, runtime.NumCPU(), wall.Seconds(), cpu.Seconds(), cpu.Seconds()/wall.Seconds(), longest.Seconds(), sum.Seconds())
	checkOwners(t, defs)
	again, err := compilePrograms(nv, "sm_90a", progs)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range progs {
		if !again[i].hit || !bytes.Equal(again[i].img, imgs[i].img) {
			t.Errorf("%s: second compile not the cached image (hit %v)", p.Name, again[i].hit)
		}
	}
}

// cubinKernels lists the kernels a cubin defines: its global functions
// marked as entries (STO_CUDA_ENTRY).
func cubinKernels(img []byte) ([]string, error) {
	// A cubin's e_version is CUDA's own (124), which debug/elf refuses:
	// read a copy marked EV_CURRENT.
	img = bytes.Clone(img)
	if len(img) > 24 {
		binary.LittleEndian.PutUint32(img[20:], uint32(elf.EV_CURRENT))
	}
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return nil, err
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && elf.ST_BIND(s.Info) == elf.STB_GLOBAL && s.Other&0x10 != 0 {
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
