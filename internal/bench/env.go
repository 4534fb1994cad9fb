package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// Optional backend capabilities, found by type assertion so the backend
// contract does not grow for the benchmark's sake (the Ollama habit:
// optional capabilities as small interfaces). A GPU backend that
// implements them gets its device named in the CSV (the memory check's
// interface is backend.MemoryReporter).
type (
	deviceNamer interface{ DeviceName() string }
	infoer      interface{ Info() string }
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
