package cudalib

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mlxcel/mlxcel/internal/settings"
)

// libSpec names one shared library the backend loads at run time.
type libSpec struct {
	what string   // human name for errors: "libcuda.so.1"
	env  string   // override: a file, or a folder to look in
	base string   // file name stem, "libnvrtc.so"
	want []string // preferred sonames, best first
}

var (
	specCUDA   = libSpec{"libcuda.so.1", "MLXCEL_CUDA_LIB", "libcuda.so", []string{"libcuda.so.1", "libcuda.so"}}
	specNVRTC  = libSpec{"libnvrtc.so", "MLXCEL_NVRTC_LIB", "libnvrtc.so", []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}}
	specCUBLAS = libSpec{"libcublas.so", "MLXCEL_CUBLAS_LIB", "libcublas.so", []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"}}
)

// searchDirs lists the folders where CUDA libraries usually live, most
// specific first. The toolkit may be absent entirely (driver-only hosts
// that got NVRTC and cuBLAS from pip wheels), so the Python site-packages
// layouts of the nvidia-* wheels are included.
func searchDirs() []string {
	var dirs []string
	add := func(pats ...string) {
		for _, p := range pats {
			m, _ := filepath.Glob(p)
			sort.Sort(sort.Reverse(sort.StringSlice(m))) // newest toolkit first
			dirs = append(dirs, m...)
		}
	}
	if v := os.Getenv("CUDA_HOME"); v != "" {
		add(v+"/lib64", v+"/targets/x86_64-linux/lib")
	}
	if v := os.Getenv("CUDA_PATH"); v != "" {
		add(v+"/lib64", v+"/targets/x86_64-linux/lib")
	}
	add("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib")
	add("/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/lib64")
	add("/usr/local/cuda-*/targets/x86_64-linux/lib", "/usr/local/cuda-*/lib64", "/opt/cuda/lib64")
	var sites []string
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		sites = append(sites, v+"/lib/python3*/site-packages")
	}
	if h, err := os.UserHomeDir(); err == nil {
		sites = append(sites, h+"/.local/lib/python3*/site-packages")
	}
	sites = append(sites, "/opt/*/.venv/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages",
		"/usr/local/lib/python3*/site-packages", "/usr/lib/python3*/dist-packages", "/usr/lib/python3/dist-packages")
	for _, s := range sites {
		add(s+"/nvidia/cu*/lib", s+"/nvidia/*/lib")
	}
	return dirs
}

// ldconfigPaths maps sonames to paths from `ldconfig -p` (64-bit entries).
func ldconfigPaths() map[string][]string {
	out := map[string][]string{}
	for _, bin := range []string{"ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"} {
		b, err := exec.Command(bin, "-p").Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			name, rest, ok := strings.Cut(line, " ")
			if !ok || !strings.Contains(rest, "x86-64") && !strings.Contains(rest, "AArch64") {
				continue
			}
			if _, p, ok := strings.Cut(rest, "=> "); ok {
				out[name] = append(out[name], strings.TrimSpace(p))
			}
		}
		break
	}
	return out
}

// candidates returns the paths to try for s, in order: the environment
// override, ldconfig's cache, then the usual folders. Nothing is hard-coded
// to one location; the first that dlopens wins.
func candidates(s libSpec) []string {
	var c []string
	seen := map[string]bool{}
	push := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			c = append(c, p)
		}
	}
	inDir := func(d string) {
		for _, n := range s.want {
			if fileExists(filepath.Join(d, n)) {
				push(filepath.Join(d, n))
			}
		}
		m, _ := filepath.Glob(filepath.Join(d, s.base+".*"))
		sort.Slice(m, func(i, j int) bool { return versionLess(m[j], m[i]) })
		for _, p := range m {
			push(p)
		}
	}
	if v := settings.Get(s.env); v != "" {
		if st, err := os.Stat(v); err == nil && st.IsDir() {
			inDir(v)
		} else {
			push(v)
		}
	}
	ld := ldconfigPaths()
	for _, n := range s.want {
		for _, p := range ld[n] {
			push(p)
		}
	}
	for _, d := range searchDirs() {
		inDir(d)
	}
	return c
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// versionLess orders lib.so.12 < lib.so.13 < lib.so.13.0.48 by the numeric
// parts after ".so".
func versionLess(a, b string) bool {
	va, vb := soVersion(a), soVersion(b)
	for i := 0; i < len(va) && i < len(vb); i++ {
		if va[i] != vb[i] {
			return va[i] < vb[i]
		}
	}
	return len(va) < len(vb)
}

func soVersion(p string) []int {
	_, v, ok := strings.Cut(filepath.Base(p), ".so.")
	if !ok {
		return nil
	}
	var out []int
	for _, f := range strings.Split(v, ".") {
		n, err := strconv.Atoi(f)
		if err != nil {
			break
		}
		out = append(out, n)
	}
	return out
}
