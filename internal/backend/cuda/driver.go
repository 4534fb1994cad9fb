//go:build linux

package cuda

import (
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

// drv holds libcuda entry points. Calls go through purego.SyscallN: no cgo,
// so the package builds with CGO_ENABLED=0.
type drv struct {
	init, driverGetVersion, deviceGetCount, deviceGet, deviceGetName, deviceGetAttribute  uintptr
	deviceTotalMem, primaryCtxRetain, primaryCtxRelease, ctxSetCurrent, ctxSynchronize    uintptr
	memAlloc, memFree, memcpyHtoD, memcpyDtoH, memcpyDtoD, memsetD8, memGetInfo           uintptr
	memcpyHtoDAsync, memcpyDtoHAsync, memAllocHost, memFreeHost                           uintptr
	moduleLoadData, moduleGetFunction, moduleUnload, funcSetAttribute, funcGetAttribute   uintptr
	launchKernel, streamCreate, streamDestroy, streamSynchronize                          uintptr
	streamBeginCapture, streamEndCapture, graphInstantiate, graphLaunch, graphExecDestroy uintptr
	graphDestroy, graphGetNodes, eventCreate, eventRecord, eventSynchronize, eventElapsed uintptr
	eventDestroy, getErrorName, getErrorString                                            uintptr
	launchKernelEx                                                                        uintptr // optional (CUDA 11.8+)
	libPath                                                                               string
}

func loadDriver() (*drv, error) {
	h, path, err := openLib(specCUDA)
	if err != nil {
		return nil, err
	}
	d := &drv{libPath: path}
	err = symbols(h, path, map[string]*uintptr{
		"cuInit": &d.init, "cuDriverGetVersion": &d.driverGetVersion, "cuDeviceGetCount": &d.deviceGetCount,
		"cuDeviceGet": &d.deviceGet, "cuDeviceGetName": &d.deviceGetName, "cuDeviceGetAttribute": &d.deviceGetAttribute,
		"cuDeviceTotalMem_v2": &d.deviceTotalMem, "cuDevicePrimaryCtxRetain": &d.primaryCtxRetain,
		"cuDevicePrimaryCtxRelease_v2|cuDevicePrimaryCtxRelease": &d.primaryCtxRelease,
		"cuCtxSetCurrent": &d.ctxSetCurrent, "cuCtxSynchronize": &d.ctxSynchronize,
		"cuMemAlloc_v2": &d.memAlloc, "cuMemFree_v2": &d.memFree, "cuMemcpyHtoD_v2": &d.memcpyHtoD,
		"cuMemcpyDtoH_v2": &d.memcpyDtoH, "cuMemcpyDtoD_v2": &d.memcpyDtoD, "cuMemsetD8_v2": &d.memsetD8,
		"cuMemGetInfo_v2": &d.memGetInfo, "cuMemcpyHtoDAsync_v2": &d.memcpyHtoDAsync,
		"cuMemcpyDtoHAsync_v2": &d.memcpyDtoHAsync, "cuMemAllocHost_v2": &d.memAllocHost, "cuMemFreeHost": &d.memFreeHost,
		"cuModuleLoadData": &d.moduleLoadData, "cuModuleGetFunction": &d.moduleGetFunction,
		"cuModuleUnload": &d.moduleUnload, "cuFuncSetAttribute": &d.funcSetAttribute,
		"cuFuncGetAttribute": &d.funcGetAttribute, "cuLaunchKernel": &d.launchKernel,
		"cuStreamCreate": &d.streamCreate, "cuStreamDestroy_v2": &d.streamDestroy,
		"cuStreamSynchronize": &d.streamSynchronize, "cuStreamBeginCapture_v2": &d.streamBeginCapture,
		"cuStreamEndCapture": &d.streamEndCapture, "cuGraphInstantiateWithFlags": &d.graphInstantiate,
		"cuGraphLaunch": &d.graphLaunch, "cuGraphExecDestroy": &d.graphExecDestroy, "cuGraphDestroy": &d.graphDestroy,
		"cuGraphGetNodes": &d.graphGetNodes, "cuEventCreate": &d.eventCreate, "cuEventRecord": &d.eventRecord,
		"cuEventSynchronize": &d.eventSynchronize, "cuEventElapsedTime_v2|cuEventElapsedTime": &d.eventElapsed,
		"cuEventDestroy_v2": &d.eventDestroy, "cuGetErrorName": &d.getErrorName, "cuGetErrorString": &d.getErrorString,
	})
	if err != nil {
		return nil, err
	}
	if p, err := purego.Dlsym(h, "cuLaunchKernelEx"); err == nil {
		d.launchKernelEx = p
	}
	return d, nil
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

func (d *drv) check(op string, r uintptr) error {
	r = uintptr(uint32(r)) // CUresult is a 32-bit enum
	if r == 0 {
		return nil
	}
	e := &cuErr{op: op, code: r, name: "?", text: "?"}
	// A *byte may hold a C address: the collector ignores pointers
	// outside the Go heap, and this keeps vet's unsafeptr check quiet.
	var p *byte
	if d.getErrorName != 0 {
		if rr, _, _ := purego.SyscallN(d.getErrorName, r, uintptr(unsafe.Pointer(&p))); uint32(rr) == 0 && p != nil {
			e.name = goString(p)
		}
		p = nil
		if rr, _, _ := purego.SyscallN(d.getErrorString, r, uintptr(unsafe.Pointer(&p))); uint32(rr) == 0 && p != nil {
			e.text = goString(p)
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
func (d *drv) call(op string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	return d.check(op, r)
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
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
	attrSMCount        = 16
	attrL2Size         = 38
	attrCCMajor        = 75
	attrCCMinor        = 76
	attrMaxSmemOptin   = 97
	attrMaxSmemPerSM   = 81 // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
	attrMemClockKHz    = 36
	attrMemBusWidthBit = 37
)

func (d *drv) attr(dev int32, a int) int {
	var v int32
	if err := d.call("cuDeviceGetAttribute", d.deviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(dev)); err != nil {
		return 0
	}
	return int(v)
}

// keep pins Go values handed to C for the duration of a call site.
func keep(v ...any) { runtime.KeepAlive(v) }
