//go:build linux

package cudalib

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/mlxcel/mlxcel/internal/settings"
)

// NVRTC holds the NVRTC entry points used to compile the embedded kernels.
type NVRTC struct {
	Version, CreateProgram, CompileProgram, GetLogSize, GetLog              uintptr
	GetCubinSize, GetCubin, GetPTXSize, GetPTX, DestroyProgram, GetErrorStr uintptr
	Major, Minor                                                            int32
	LibPath                                                                 string
}

func LoadNVRTC() (*NVRTC, error) {
	h, path, err := openLib(specNVRTC)
	if err != nil {
		return nil, err
	}
	// NVRTC dlopens its builtins library by soname at compile time; load
	// it from the same folder first so that works without LD_LIBRARY_PATH.
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "libnvrtc-builtins.so*")); len(m) > 0 {
		for _, p := range m {
			if _, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
				break
			}
		}
	}
	n := &NVRTC{LibPath: path}
	err = symbols(h, path, map[string]*uintptr{
		"nvrtcVersion": &n.Version, "nvrtcCreateProgram": &n.CreateProgram, "nvrtcCompileProgram": &n.CompileProgram,
		"nvrtcGetProgramLogSize": &n.GetLogSize, "nvrtcGetProgramLog": &n.GetLog, "nvrtcGetCUBINSize": &n.GetCubinSize,
		"nvrtcGetCUBIN": &n.GetCubin, "nvrtcGetPTXSize": &n.GetPTXSize, "nvrtcGetPTX": &n.GetPTX,
		"nvrtcDestroyProgram": &n.DestroyProgram, "nvrtcGetErrorString": &n.GetErrorStr,
	})
	if err != nil {
		return nil, err
	}
	purego.SyscallN(n.Version, uintptr(unsafe.Pointer(&n.Major)), uintptr(unsafe.Pointer(&n.Minor)))
	return n, nil
}

func (n *NVRTC) Err(op string, r uintptr) error {
	r = uintptr(uint32(r))
	if r == 0 {
		return nil
	}
	msg := "?"
	if p, _, _ := purego.SyscallN(n.GetErrorStr, r); p != 0 {
		msg = GoString(*(**byte)(unsafe.Pointer(&p)))
	}
	return fmt.Errorf("nvrtc: %s: %s (%d)", op, msg, r)
}

func CStr(s string) []byte { return append([]byte(s), 0) }

// compile builds src for the given architecture ("sm_90") and returns a
// cubin, or PTX when this NVRTC is older than the device (the driver then
// JIT-compiles it).
func (n *NVRTC) Compile(src, name, arch string, opts []string) ([]byte, error) {
	csrc, cname := CStr(src), CStr(name)
	var prog uintptr
	if r, _, _ := purego.SyscallN(n.CreateProgram, uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(&csrc[0])),
		uintptr(unsafe.Pointer(&cname[0])), 0, 0, 0); uint32(r) != 0 {
		return nil, n.Err("create program", r)
	}
	defer purego.SyscallN(n.DestroyProgram, uintptr(unsafe.Pointer(&prog)))
	build := func(target string) error {
		all := append([]string{"--gpu-architecture=" + target}, opts...)
		bufs := make([][]byte, len(all))
		ptrs := make([]*byte, len(all))
		for i, o := range all {
			bufs[i] = CStr(o)
			ptrs[i] = &bufs[i][0]
		}
		r, _, _ := purego.SyscallN(n.CompileProgram, prog, uintptr(len(ptrs)), uintptr(unsafe.Pointer(&ptrs[0])))
		Keep(bufs, ptrs)
		if uint32(r) != 0 {
			var sz uintptr
			purego.SyscallN(n.GetLogSize, prog, uintptr(unsafe.Pointer(&sz)))
			log := make([]byte, sz+1)
			purego.SyscallN(n.GetLog, prog, uintptr(unsafe.Pointer(&log[0])))
			return fmt.Errorf("%w\n%s", n.Err("compile "+name+" for "+target, r), string(log[:max(int(sz)-1, 0)]))
		}
		return nil
	}
	if err := build(arch); err == nil {
		var sz uintptr
		purego.SyscallN(n.GetCubinSize, prog, uintptr(unsafe.Pointer(&sz)))
		out := make([]byte, sz)
		if r, _, _ := purego.SyscallN(n.GetCubin, prog, uintptr(unsafe.Pointer(&out[0]))); uint32(r) != 0 {
			return nil, n.Err("get cubin", r)
		}
		return out, nil
	} else if len(arch) < 3 || arch[:3] != "sm_" {
		return nil, err
	} else if err2 := build("compute_" + arch[3:]); err2 != nil {
		return nil, err // the sm_ error is the informative one
	}
	var sz uintptr
	purego.SyscallN(n.GetPTXSize, prog, uintptr(unsafe.Pointer(&sz)))
	out := make([]byte, sz)
	if r, _, _ := purego.SyscallN(n.GetPTX, prog, uintptr(unsafe.Pointer(&out[0]))); uint32(r) != 0 {
		return nil, n.Err("get ptx", r)
	}
	return out, nil
}

// cacheDir is where compiled kernels are kept between runs.
func cacheDir() string {
	if d := settings.Get("MLXCEL_CUDA_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "mlxcel", "cuda")
}

// compileCached returns the image for src from the disk cache, keyed by the
// source hash, the architecture, the NVRTC version and the options, or
// compiles and stores it. A cache that cannot be written is not an error:
// the kernels are simply compiled again next time (about a second).
func (n *NVRTC) CompileCached(src, name, arch string, opts []string) (img []byte, hit bool, err error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00nvrtc %d.%d\x00%q", src, arch, n.Major, n.Minor, opts)
	key := hex.EncodeToString(h.Sum(nil))[:32]
	dir := cacheDir()
	path := ""
	if dir != "" {
		path = filepath.Join(dir, fmt.Sprintf("%s-%s-%s.bin", name, arch, key))
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b, true, nil
		}
	}
	img, err = n.Compile(src, name, arch, opts)
	if err != nil {
		return nil, false, err
	}
	if path != "" && os.MkdirAll(dir, 0o755) == nil {
		tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
		if os.WriteFile(tmp, img, 0o644) == nil {
			_ = os.Rename(tmp, path)
		}
	}
	return img, false, nil
}
