//go:build linux

package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/ebitengine/purego"
)

// nvrtc holds the NVRTC entry points used to compile the embedded kernels.
type nvrtc struct {
	version, createProgram, compileProgram, getLogSize, getLog              uintptr
	getCubinSize, getCubin, getPTXSize, getPTX, destroyProgram, getErrorStr uintptr
	major, minor                                                            int32
	libPath                                                                 string
}

func loadNVRTC() (*nvrtc, error) {
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
	n := &nvrtc{libPath: path}
	err = symbols(h, path, map[string]*uintptr{
		"nvrtcVersion": &n.version, "nvrtcCreateProgram": &n.createProgram, "nvrtcCompileProgram": &n.compileProgram,
		"nvrtcGetProgramLogSize": &n.getLogSize, "nvrtcGetProgramLog": &n.getLog, "nvrtcGetCUBINSize": &n.getCubinSize,
		"nvrtcGetCUBIN": &n.getCubin, "nvrtcGetPTXSize": &n.getPTXSize, "nvrtcGetPTX": &n.getPTX,
		"nvrtcDestroyProgram": &n.destroyProgram, "nvrtcGetErrorString": &n.getErrorStr,
	})
	if err != nil {
		return nil, err
	}
	purego.SyscallN(n.version, uintptr(unsafe.Pointer(&n.major)), uintptr(unsafe.Pointer(&n.minor)))
	return n, nil
}

func (n *nvrtc) err(op string, r uintptr) error {
	r = uintptr(uint32(r))
	if r == 0 {
		return nil
	}
	msg := "?"
	if p, _, _ := purego.SyscallN(n.getErrorStr, r); p != 0 {
		msg = goString(*(**byte)(unsafe.Pointer(&p)))
	}
	return fmt.Errorf("nvrtc: %s: %s (%d)", op, msg, r)
}

func cstr(s string) []byte { return append([]byte(s), 0) }

// compile builds src for the given architecture ("sm_90") and returns a
// cubin, or PTX when this NVRTC is older than the device (the driver then
// JIT-compiles it).
func (n *nvrtc) compile(src, name, arch string, opts []string) ([]byte, error) {
	csrc, cname := cstr(src), cstr(name)
	var prog uintptr
	if r, _, _ := purego.SyscallN(n.createProgram, uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(&csrc[0])),
		uintptr(unsafe.Pointer(&cname[0])), 0, 0, 0); uint32(r) != 0 {
		return nil, n.err("create program", r)
	}
	defer purego.SyscallN(n.destroyProgram, uintptr(unsafe.Pointer(&prog)))
	build := func(target string) error {
		all := append([]string{"--gpu-architecture=" + target}, opts...)
		bufs := make([][]byte, len(all))
		ptrs := make([]*byte, len(all))
		for i, o := range all {
			bufs[i] = cstr(o)
			ptrs[i] = &bufs[i][0]
		}
		r, _, _ := purego.SyscallN(n.compileProgram, prog, uintptr(len(ptrs)), uintptr(unsafe.Pointer(&ptrs[0])))
		keep(bufs, ptrs)
		if uint32(r) != 0 {
			var sz uintptr
			purego.SyscallN(n.getLogSize, prog, uintptr(unsafe.Pointer(&sz)))
			log := make([]byte, sz+1)
			purego.SyscallN(n.getLog, prog, uintptr(unsafe.Pointer(&log[0])))
			return fmt.Errorf("%w\n%s", n.err("compile "+name+" for "+target, r), string(log[:max(int(sz)-1, 0)]))
		}
		return nil
	}
	if err := build(arch); err == nil {
		var sz uintptr
		purego.SyscallN(n.getCubinSize, prog, uintptr(unsafe.Pointer(&sz)))
		out := make([]byte, sz)
		if r, _, _ := purego.SyscallN(n.getCubin, prog, uintptr(unsafe.Pointer(&out[0]))); uint32(r) != 0 {
			return nil, n.err("get cubin", r)
		}
		return out, nil
	} else if len(arch) < 3 || arch[:3] != "sm_" {
		return nil, err
	} else if err2 := build("compute_" + arch[3:]); err2 != nil {
		return nil, err // the sm_ error is the informative one
	}
	var sz uintptr
	purego.SyscallN(n.getPTXSize, prog, uintptr(unsafe.Pointer(&sz)))
	out := make([]byte, sz)
	if r, _, _ := purego.SyscallN(n.getPTX, prog, uintptr(unsafe.Pointer(&out[0]))); uint32(r) != 0 {
		return nil, n.err("get ptx", r)
	}
	return out, nil
}

// cacheDir is where compiled kernels are kept between runs.
func cacheDir() string {
	if d := os.Getenv("MLXCEL_CUDA_CACHE"); d != "" {
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
func (n *nvrtc) compileCached(src, name, arch string, opts []string) (img []byte, hit bool, err error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00nvrtc %d.%d\x00%q", src, arch, n.major, n.minor, opts)
	key := hex.EncodeToString(h.Sum(nil))[:32]
	dir := cacheDir()
	path := ""
	if dir != "" {
		path = filepath.Join(dir, fmt.Sprintf("%s-%s-%s.bin", name, arch, key))
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b, true, nil
		}
	}
	img, err = n.compile(src, name, arch, opts)
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
