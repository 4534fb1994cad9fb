//go:build linux

package cudalib

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// openLib dlopens the first candidate of s that loads. The error names
// every path tried, so a user can see why and set the override.
func openLib(s libSpec) (uintptr, string, error) {
	var tried []string
	for _, p := range candidates(s) {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return h, p, nil
		}
		tried = append(tried, p)
	}
	// Last resort: let the dynamic loader search its own path.
	for _, n := range s.want {
		if h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			return h, n, nil
		}
	}
	msg := fmt.Sprintf("cuda: %s not found (set %s to the library or its folder)", s.what, s.env)
	if len(tried) > 0 {
		msg += fmt.Sprintf("; tried %s", strings.Join(tried, ", "))
	}
	return 0, "", &Unavailable{msg}
}

// Unavailable is the error New returns when this machine cannot run the
// backend at all (no library, no driver, no device), as opposed to a
// failure of the backend itself.
type Unavailable struct{ msg string }

func (e *Unavailable) Error() string { return e.msg }

// NewUnavailable is the Unavailable error with message msg.
func NewUnavailable(msg string) *Unavailable { return &Unavailable{msg} }

// symbols resolves each name into the matching *uintptr; for names with
// alternatives ("a|b") the first found wins.
func symbols(lib uintptr, libName string, syms map[string]*uintptr) error {
	for names, dst := range syms {
		for _, n := range strings.Split(names, "|") {
			if p, err := purego.Dlsym(lib, n); err == nil && p != 0 {
				*dst = p
				break
			}
		}
		if *dst == 0 {
			return fmt.Errorf("cuda: %s lacks %s", libName, names)
		}
	}
	return nil
}

// Driver holds libcuda entry points. Calls go through purego.SyscallN: no cgo,
// so the package builds with CGO_ENABLED=0.
type Driver struct {
	Init, DriverGetVersion, DeviceGetCount, DeviceGet, DeviceGetName, DeviceGetAttribute  uintptr
	DeviceTotalMem, PrimaryCtxRetain, PrimaryCtxRelease, CtxSetCurrent, CtxSynchronize    uintptr
	MemAlloc, MemFree, MemcpyHtoD, MemcpyDtoH, MemcpyDtoD, MemsetD8, MemGetInfo           uintptr
	MemcpyHtoDAsync, MemcpyDtoHAsync, MemAllocHost, MemFreeHost                           uintptr
	ModuleLoadData, ModuleGetFunction, ModuleUnload, FuncSetAttribute, FuncGetAttribute   uintptr
	LaunchKernel, StreamCreate, StreamDestroy, StreamSynchronize                          uintptr
	StreamBeginCapture, StreamEndCapture, GraphInstantiate, GraphLaunch, GraphExecDestroy uintptr
	GraphDestroy, GraphGetNodes, EventCreate, EventRecord, EventSynchronize, EventElapsed uintptr
	EventDestroy, GetErrorName, GetErrorString                                            uintptr
	LaunchKernelEx                                                                        uintptr // optional (CUDA 11.8+)
	TensorMapEncodeTiled                                                                  uintptr // optional (CUDA 12.0+)
	LibPath                                                                               string
}

func LoadDriver() (*Driver, error) {
	h, path, err := openLib(specCUDA)
	if err != nil {
		return nil, err
	}
	d := &Driver{LibPath: path}
	err = symbols(h, path, map[string]*uintptr{
		"cuInit": &d.Init, "cuDriverGetVersion": &d.DriverGetVersion, "cuDeviceGetCount": &d.DeviceGetCount,
		"cuDeviceGet": &d.DeviceGet, "cuDeviceGetName": &d.DeviceGetName, "cuDeviceGetAttribute": &d.DeviceGetAttribute,
		"cuDeviceTotalMem_v2": &d.DeviceTotalMem, "cuDevicePrimaryCtxRetain": &d.PrimaryCtxRetain,
		"cuDevicePrimaryCtxRelease_v2|cuDevicePrimaryCtxRelease": &d.PrimaryCtxRelease,
		"cuCtxSetCurrent": &d.CtxSetCurrent, "cuCtxSynchronize": &d.CtxSynchronize,
		"cuMemAlloc_v2": &d.MemAlloc, "cuMemFree_v2": &d.MemFree, "cuMemcpyHtoD_v2": &d.MemcpyHtoD,
		"cuMemcpyDtoH_v2": &d.MemcpyDtoH, "cuMemcpyDtoD_v2": &d.MemcpyDtoD, "cuMemsetD8_v2": &d.MemsetD8,
		"cuMemGetInfo_v2": &d.MemGetInfo, "cuMemcpyHtoDAsync_v2": &d.MemcpyHtoDAsync,
		"cuMemcpyDtoHAsync_v2": &d.MemcpyDtoHAsync, "cuMemAllocHost_v2": &d.MemAllocHost, "cuMemFreeHost": &d.MemFreeHost,
		"cuModuleLoadData": &d.ModuleLoadData, "cuModuleGetFunction": &d.ModuleGetFunction,
		"cuModuleUnload": &d.ModuleUnload, "cuFuncSetAttribute": &d.FuncSetAttribute,
		"cuFuncGetAttribute": &d.FuncGetAttribute, "cuLaunchKernel": &d.LaunchKernel,
		"cuStreamCreate": &d.StreamCreate, "cuStreamDestroy_v2": &d.StreamDestroy,
		"cuStreamSynchronize": &d.StreamSynchronize, "cuStreamBeginCapture_v2": &d.StreamBeginCapture,
		"cuStreamEndCapture": &d.StreamEndCapture, "cuGraphInstantiateWithFlags": &d.GraphInstantiate,
		"cuGraphLaunch": &d.GraphLaunch, "cuGraphExecDestroy": &d.GraphExecDestroy, "cuGraphDestroy": &d.GraphDestroy,
		"cuGraphGetNodes": &d.GraphGetNodes, "cuEventCreate": &d.EventCreate, "cuEventRecord": &d.EventRecord,
		"cuEventSynchronize": &d.EventSynchronize, "cuEventElapsedTime_v2|cuEventElapsedTime": &d.EventElapsed,
		"cuEventDestroy_v2": &d.EventDestroy, "cuGetErrorName": &d.GetErrorName, "cuGetErrorString": &d.GetErrorString,
	})
	if err != nil {
		return nil, err
	}
	if p, err := purego.Dlsym(h, "cuLaunchKernelEx"); err == nil {
		d.LaunchKernelEx = p
	}
	if p, err := purego.Dlsym(h, "cuTensorMapEncodeTiled"); err == nil {
		d.TensorMapEncodeTiled = p
	}
	return d, nil
}

// OutOfMemory reports whether err is the driver's CUDA_ERROR_OUT_OF_MEMORY.
func OutOfMemory(err error) bool {
	var e *cuErr
	return errors.As(err, &e) && e.code == 2
}

// cuErr is a CUresult with the driver's own name and text.
type cuErr struct {
	op   string
	code uintptr
	name string
	text string
}

func (e *cuErr) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d): %s", e.op, e.name, e.code, e.text)
}

func (d *Driver) Check(op string, r uintptr) error {
	r = uintptr(uint32(r)) // CUresult is a 32-bit enum
	if r == 0 {
		return nil
	}
	e := &cuErr{op: op, code: r, name: "?", text: "?"}
	// A *byte may hold a C address: the collector ignores pointers
	// outside the Go heap, and this keeps vet's unsafeptr check quiet.
	var p *byte
	if d.GetErrorName != 0 {
		if rr, _, _ := purego.SyscallN(d.GetErrorName, r, uintptr(unsafe.Pointer(&p))); uint32(rr) == 0 && p != nil {
			e.name = GoString(p)
		}
		p = nil
		if rr, _, _ := purego.SyscallN(d.GetErrorString, r, uintptr(unsafe.Pointer(&p))); uint32(rr) == 0 && p != nil {
			e.text = GoString(p)
		}
	}
	return e
}

// call invokes a driver entry point and converts its CUresult. Callers
// write pointer arguments as uintptr(unsafe.Pointer(&v)) in the call
// itself: go:uintptrescapes then moves v to the heap for the call. Without
// it a goroutine stack that grew during the call left the C side writing
// to the old stack copy (seen: cuMemAlloc "returned" address 0 in a fresh
// test goroutine).
//
//go:uintptrescapes
func (d *Driver) Call(op string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	return d.Check(op, r)
}

// goString copies a NUL-terminated C string.
func GoString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// device attribute ids (CUdevice_attribute).
const (
	AttrSMCount        = 16
	AttrL2Size         = 38
	AttrCCMajor        = 75
	AttrCCMinor        = 76
	AttrMaxSmemOptin   = 97
	AttrMaxSmemPerSM   = 81 // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
	AttrMemClockKHz    = 36
	AttrMemBusWidthBit = 37
)

func (d *Driver) Attr(dev int32, a int) int {
	var v int32
	if err := d.Call("cuDeviceGetAttribute", d.DeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(dev)); err != nil {
		return 0
	}
	return int(v)
}

// keep pins Go values handed to C for the duration of a call site.
func Keep(v ...any) { runtime.KeepAlive(v) }
