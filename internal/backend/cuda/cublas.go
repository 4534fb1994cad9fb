//go:build linux

package cuda

import (
	"fmt"
	"path/filepath"
	"unsafe"

	"github.com/ebitengine/purego"
)

// blas wraps the few cuBLAS calls used for many-row matrix products
// (prefill), where tensor-core GEMMs beat the hand-written GEMV kernels.
type blas struct {
	create, destroy, setStream, setMathMode, setWorkspace, gemmEx uintptr
	handle                                                        uintptr
	libPath                                                       string
}

const (
	cudaR32F         = 0
	cudaR16F         = 2
	cudaR16BF        = 14
	cublasCompute32F = 68
	cublasOpN        = 0
	cublasOpT        = 1
	cublasGemmDflt   = ^uintptr(0) // CUBLAS_GEMM_DEFAULT = -1
)

func loadBLAS() (*blas, error) {
	// libcublas needs libcublasLt; load the one beside it first so the
	// dependency resolves without LD_LIBRARY_PATH.
	var path string
	var h uintptr
	var err error
	if h, path, err = openLib(specCUBLAS); err != nil {
		return nil, err
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "libcublasLt.so*")); len(m) > 0 {
		_, _ = purego.Dlopen(m[0], purego.RTLD_NOW|purego.RTLD_GLOBAL)
	}
	b := &blas{libPath: path}
	err = symbols(h, path, map[string]*uintptr{
		"cublasCreate_v2": &b.create, "cublasDestroy_v2": &b.destroy, "cublasSetStream_v2": &b.setStream,
		"cublasSetMathMode": &b.setMathMode, "cublasSetWorkspace_v2": &b.setWorkspace, "cublasGemmEx": &b.gemmEx,
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func blasErr(op string, r uintptr) error {
	if uint32(r) == 0 {
		return nil
	}
	return fmt.Errorf("cublas: %s: status %d", op, uint32(r))
}

func (b *blas) init(stream, workspace uintptr, wsBytes int) error {
	r, _, _ := purego.SyscallN(b.create, uintptr(unsafe.Pointer(&b.handle)))
	if err := blasErr("create", r); err != nil {
		return err
	}
	r, _, _ = purego.SyscallN(b.setStream, b.handle, stream)
	if err := blasErr("set stream", r); err != nil {
		return err
	}
	// A user workspace keeps cuBLAS from allocating during stream capture.
	r, _, _ = purego.SyscallN(b.setWorkspace, b.handle, workspace, uintptr(wsBytes))
	return blasErr("set workspace", r)
}
