package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// Optional backend capabilities, found by type assertion so the backend
// contract does not grow for the benchmark's sake (the Ollama habit:
// optional capabilities as small interfaces). A GPU backend that
// implements them gets its device named in the CSV and a memory check
// against device memory.
type (
	deviceNamer  interface{ DeviceName() string }
	infoer       interface{ Info() string }
	memoryReport interface {
		// MemoryInfo returns free and total device memory in bytes.
		MemoryInfo() (free, total int64, err error)
	}
)

// Hardware names what the benchmark ran on: the GPU for a device backend
// that says, else the CPU model and how many threads Go may use.
func Hardware(be backend.Backend) string {
	if be != nil {
		if d, ok := be.(deviceNamer); ok {
			if n := d.DeviceName(); n != "" {
				return n
			}
		}
		// The CUDA backend describes itself as "NVIDIA H200 sm_90, 132
		// SMs; libcuda ...": the part before the first ';' names the GPU.
		if d, ok := be.(infoer); ok {
			if n, _, _ := strings.Cut(d.Info(), ";"); strings.TrimSpace(n) != "" {
				return strings.TrimSpace(n)
			}
		}
		if a, ok := be.(backend.Accelerator); ok {
			return a.DeviceName()
		}
	}
	return fmt.Sprintf("%s (%d threads)", cpuModel(), runtime.GOMAXPROCS(0))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// Version is the VCS revision the binary was built from (12 hex digits,
// "+dirty" when the tree had local changes), else the module version, else
// "devel". Build with -buildvcs=true where GOFLAGS turns stamping off.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		// Built without VCS stamping (go test, go run, GOFLAGS=-buildvcs=false):
		// a module version from `go install ...@vX` still identifies it.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		return "devel"
	}
	return rev[:min(12, len(rev))] + dirty
}

// BuildType describes the toolchain and the build settings that change
// performance, e.g. "go1.26.8 CGO_ENABLED=0 GOAMD64=v1".
func BuildType() string {
	parts := []string{runtime.Version()}
	cgo := "unknown"
	var extra []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "CGO_ENABLED":
				cgo = s.Value
			case "GOAMD64", "GOARM64":
				extra = append(extra, s.Key+"="+s.Value)
			case "-race":
				if s.Value == "true" {
					extra = append(extra, "-race")
				}
			}
		}
	}
	parts = append(parts, "CGO_ENABLED="+cgo)
	return strings.Join(append(parts, extra...), " ")
}

// hostMemory returns the memory this process may still use: the lesser of
// MemAvailable (physical RAM not in use) and the cgroup's remaining limit.
func hostMemory() (int64, string) {
	avail, src := int64(-1), ""
	if v := meminfo("MemAvailable"); v > 0 {
		avail, src = v, "MemAvailable"
	} else if v := meminfo("MemTotal"); v > 0 {
		avail, src = v, "MemTotal"
	}
	if limit := cgroupRemaining(); limit > 0 && (avail < 0 || limit < avail) {
		avail, src = limit, "cgroup memory.max"
	}
	return avail, src
}

func meminfo(key string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			return -1
		}
		n, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return -1
		}
		if len(fs) > 1 && fs[1] == "kB" {
			n *= 1024
		}
		return n
	}
	return -1
}

func cgroupRemaining() int64 {
	read := func(p string) int64 {
		b, err := os.ReadFile(p)
		if err != nil {
			return -1
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return -1 // "max": no limit
		}
		return n
	}
	limit, used := read("/sys/fs/cgroup/memory.max"), read("/sys/fs/cgroup/memory.current")
	if limit <= 0 || used < 0 {
		return -1
	}
	return max(limit-used, 0)
}

// loadAverage is /proc/loadavg's first three fields, or "" elsewhere.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], ", ")
}
