//go:build linux

package cudalib

import (
	"fmt"
	"path/filepath"
	"unsafe"

	"github.com/ebitengine/purego"
)

// BLAS wraps the few cuBLAS calls used for many-row matrix products
// (prefill), where tensor-core GEMMs beat the hand-written GEMV kernels.
type BLAS struct {
	Create, Destroy, SetStream, SetMathMode, SetWorkspace, GemmEx uintptr
	Handle                                                        uintptr
	LibPath                                                       string
}

const (
	CudaR32F          = 0
	CudaR16F          = 2
	CudaR16BF         = 14
	CublasCompute32F  = 68
	CublasComputeTF32 = 77 // CUBLAS_COMPUTE_32F_FAST_TF32
	CublasOpN         = 0
	CublasOpT         = 1
	CublasGemmDflt    = ^uintptr(0) // CUBLAS_GEMM_DEFAULT = -1
)

func LoadBLAS() (*BLAS, error) {
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
	b := &BLAS{LibPath: path}
	err = symbols(h, path, map[string]*uintptr{
		"cublasCreate_v2": &b.Create, "cublasDestroy_v2": &b.Destroy, "cublasSetStream_v2": &b.SetStream,
		"cublasSetMathMode": &b.SetMathMode, "cublasSetWorkspace_v2": &b.SetWorkspace, "cublasGemmEx": &b.GemmEx,
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func BLASErr(op string, r uintptr) error {
	if uint32(r) == 0 {
		return nil
	}
	return fmt.Errorf("cublas: %s: status %d", op, uint32(r))
}

func (b *BLAS) Init(stream, workspace uintptr, wsBytes int) error {
	r, _, _ := purego.SyscallN(b.Create, uintptr(unsafe.Pointer(&b.Handle)))
	if err := BLASErr("create", r); err != nil {
		return err
	}
	r, _, _ = purego.SyscallN(b.SetStream, b.Handle, stream)
	if err := BLASErr("set stream", r); err != nil {
		return err
	}
	// A user workspace keeps cuBLAS from allocating during stream capture.
	r, _, _ = purego.SyscallN(b.SetWorkspace, b.Handle, workspace, uintptr(wsBytes))
	return BLASErr("set workspace", r)
}
