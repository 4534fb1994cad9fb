//go:build linux

package cuda

import (
	"fmt"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/cudalib"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/kernels"

	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
)

func kernelSource() string { return kernels.Source() }

func init() {
	backend.Register("cuda", func(o backend.Options) (backend.Backend, error) { return New(o.Device) })
}

// Backend drives one GPU. It is safe for use by one goroutine at a time
// (the engine's); a mutex makes concurrent calls wait rather than corrupt
// state. CUDA's current context belongs to an OS thread, so every method
// that calls the driver pins its goroutine to its thread for the call and
// makes the context current there (see bind).
type Backend struct {
	mu   sync.Mutex
	d    *cudalib.Driver
	nv   *cudalib.NVRTC
	bl   *cudalib.BLAS
	dev  int32
	ctx  uintptr
	strm uintptr
	mods []uintptr // a module a kernel program (loadKernels)
	fns  map[string]uintptr

	Device      string // "NVIDIA H200"
	Arch        string // "sm_90a" (nvrtcArch)
	SMs         int
	CompileTime time.Duration // NVRTC time at start (0 when every program hit the cache)
	CacheHit    bool          // every kernel program came from the cache
	// ProgramTimes: each compiled program's NVRTC time (cache misses only;
	// they ran in parallel, so CompileTime is about the longest).
	ProgramTimes map[string]time.Duration

	persistent []uintptr // device allocations freed at Close

	// Step state: ops' scratch comes from the arena, rewound at every
	// BeginStep; tensors from NewTensor are recycled through pool.
	inStep  bool
	pool    tensorPool
	arena   arena
	stepBuf devBuf // tokens, positions, tok2seq, logit rows, block tables
	step    stepInfo

	rec    recorder
	graphs graphCache
	prof   profiler
	idle   idleClock // device idle time between a sync and the next launch (DeviceIdle)
	// Kernel facts the recording peepholes ask for (ops_gemv.go: multiOf).
	multiByFn     map[uintptr]multiInfo
	multiDefaults [2][4][3]multiInfo
	moeDecNames   map[moeDecKey]moeDecVal // ops_moe_decode.go: moeDecKernel
	mmaOff        bool                    // the MoE routers' GEMVs stay off the tensor cores (f32 logits for the top-k)

	pdl bool // programmatic dependent launch (runEx): Hopper and cuLaunchKernelEx
	// qmmwCandidates: the warpgroup qmm4 forms besides the planner's that
	// got their shared memory (TestBenchQMM times them).
	qmmwCandidates []string
	plan.Tuning    // decode attention's measured sizes (tests set others)
	// flash2 holds, per KV element (kvStore.kern's suffix: "" f16, "_f8"
	// E4M3), the head dims whose prefill kernel (flash2_attn_*) got its
	// dynamic shared memory (optInFlash2); dtile the same for attn_dtile
	// (optInDecodeTile).
	flash2 map[string]map[int]bool
	dtile  map[string]map[int]bool
	// deltaChunkKD: the largest key dim whose chunked delta-rule kernels
	// got their dynamic shared memory (optInDeltaChunk; 0: none).
	deltaChunkKD int

	tmaps tensorMaps // TMA descriptors of bf16 activations (tensormap.go)

	cntBuf devBuf // decode attention: per-(token, head) split counters, kept zero
	cntN   int    // counters zeroed so far

	ropeTabs map[string]uintptr // inverse-frequency tables by content
	scratch  devBuf             // cuBLAS path: dequantized weights
	scratchX devBuf             // cuBLAS bf16 path: activations rounded to bf16
	wsBuf    devBuf             // cuBLAS workspace
	pinned   []byte             // page-locked staging for uploads

	// Asynchronous steps (async.go).
	feed     devBuf        // the last argmax's ids, read by FeedTokens
	feedRows int           // rows of that argmax
	inSlots  [3]pinnedSlot // BeginStep's uploads, in turn
	nextIn   int
	idSlots  [4]idSlot // ArgmaxAsync's and SampleRowsAsync's copies to the host, in turn
	nextID   int
	// SampleRowsAsync's parameter uploads, in turn (sample.go): two, so a
	// step queued ahead does not wait for the running step's upload.
	sampleIn     [2]pinnedSlot
	nextSampleIn int
	queued       uint64 // copies and flushes queued on the stream so far
	err          error  // first asynchronous failure, sticky
}

type devBuf struct {
	ptr  uintptr
	size int
}

// New starts the backend on GPU ordinal dev: loads libcuda, NVRTC and
// cuBLAS, creates a stream and compiles (or loads from the disk cache) the
// kernels for this device's architecture.
func New(dev int) (*Backend, error) {
	d, err := cudalib.LoadDriver()
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.Call("cuInit", d.Init, 0); err != nil {
		return nil, cudalib.NewUnavailable(fmt.Sprintf("cuda: no usable driver or device (%v)", err))
	}
	var n int32
	if err := d.Call("cuDeviceGetCount", d.DeviceGetCount, uintptr(unsafe.Pointer(&n))); err != nil || n == 0 {
		return nil, cudalib.NewUnavailable("cuda: no CUDA device found")
	}
	if dev < 0 || dev >= int(n) {
		return nil, fmt.Errorf("cuda: device %d out of range (%d devices)", dev, n)
	}
	b := &Backend{d: d, fns: map[string]uintptr{}, ropeTabs: map[string]uintptr{}}
	if err := d.Call("cuDeviceGet", d.DeviceGet, uintptr(unsafe.Pointer(&b.dev)), uintptr(dev)); err != nil {
		return nil, err
	}
	name := make([]byte, 256)
	_ = d.Call("cuDeviceGetName", d.DeviceGetName, uintptr(unsafe.Pointer(&name[0])), 256, uintptr(b.dev))
	b.Device = strings.TrimRight(string(name), "\x00")
	b.Arch = nvrtcArch(d.Attr(b.dev, cudalib.AttrCCMajor), d.Attr(b.dev, cudalib.AttrCCMinor))
	b.SMs = d.Attr(b.dev, cudalib.AttrSMCount)
	if err := d.Call("cuDevicePrimaryCtxRetain", d.PrimaryCtxRetain, uintptr(unsafe.Pointer(&b.ctx)), uintptr(b.dev)); err != nil {
		return nil, err
	}
	if err := d.Call("cuCtxSetCurrent", d.CtxSetCurrent, b.ctx); err != nil {
		return nil, err
	}
	if err := d.Call("cuStreamCreate", d.StreamCreate, uintptr(unsafe.Pointer(&b.strm)), 0); err != nil {
		return nil, err
	}
	if b.nv, err = cudalib.LoadNVRTC(); err != nil {
		return nil, err
	}
	if b.bl, err = cudalib.LoadBLAS(); err != nil {
		return nil, err
	}
	b.wsBuf.size = 32 << 20
	if b.wsBuf.ptr, err = b.alloc(b.wsBuf.size); err != nil {
		return nil, err
	}
	if err := b.bl.Init(b.strm, b.wsBuf.ptr, b.wsBuf.size); err != nil {
		return nil, err
	}
	if err := b.loadKernels(); err != nil {
		return nil, err
	}
	b.setDefaults()
	b.flash2 = map[string]map[int]bool{"": b.optInFlash2(""), "_f8": b.optInFlash2("_f8")}
	b.dtile = map[string]map[int]bool{"": b.optInDecodeTile(""), "_f8": b.optInDecodeTile("_f8")}
	b.deltaChunkKD = b.optInDeltaChunk()
	// PDL (griddepcontrol) and decode attention's cluster merge (the _c
	// kernels) need Hopper and cuLaunchKernelEx; 16 blocks a cluster need
	// the non-portable opt-in.
	hopper := b.d.LaunchKernelEx != 0 && b.d.Attr(b.dev, cudalib.AttrCCMajor) >= 9
	b.pdl = hopper
	b.DecClusterMax, b.Clusters = 0, hopper
	if hopper {
		b.DecClusterMax = b.optInClusters()
	}
	b.QMMWarpgroup = b.Arch == "sm_90a" && b.optInQMMW()
	return b, nil
}

// nvrtcArch is the target the kernels compile for: sm_MN, with the
// arch-specific features (wgmma: qmm_wgmma.cu) on compute capability 9.0,
// whose cubin then runs on 9.0 devices only, which is the one present.
func nvrtcArch(major, minor int) string {
	if major == 9 && minor == 0 {
		return "sm_90a"
	}
	return fmt.Sprintf("sm_%d%d", major, minor)
}

// optInQMMW grants the warpgroup qmm4 forms their dynamic shared memory
// (over the 48 KB default); false when the device refuses the planner's
// form, or the driver cannot encode the tensor maps they read x through.
// The benchmark candidates it grants are listed in qmmwCandidates.
func (b *Backend) optInQMMW() bool {
	if b.d.TensorMapEncodeTiled == 0 {
		return false
	}
	b.qmmwCandidates = nil
	for i, k := range plan.QMMWKernels() {
		f := b.fns[k.Name]
		ok := k.Smem <= b.d.Attr(b.dev, cudalib.AttrMaxSmemOptin) &&
			b.d.Call("cuFuncSetAttribute", b.d.FuncSetAttribute, f, funcAttrMaxDynamicSmem, uintptr(k.Smem)) == nil
		switch {
		case !ok && i == 0:
			return false
		case ok && i > 0:
			b.qmmwCandidates = append(b.qmmwCandidates, k.Variant)
		}
		if ok {
			_ = b.d.Call("cuFuncSetAttribute", b.d.FuncSetAttribute, f, funcAttrSmemCarveout, 100) // a hint
		}
	}
	return true
}

// bind pins the calling goroutine to its OS thread and makes the context
// current there; call the returned func when done with the driver.
func (b *Backend) bind() func() {
	runtime.LockOSThread()
	if err := b.d.Call("cuCtxSetCurrent", b.d.CtxSetCurrent, b.ctx); err != nil {
		b.fail(err)
	}
	return runtime.UnlockOSThread
}

func (b *Backend) fail(err error) {
	if b.err == nil && err != nil {
		b.err = err
	}
}

// kernelName finds the kernels in the source; macro-generated ones are
// listed by their expansions below.
var kernelName = regexp.MustCompile(`extern "C" __global__ void (?:__launch_bounds__\([A-Z_0-9]+\)\s*)?([a-z_0-9]+)\(`)

func kernelNames() []string {
	var names []string
	for _, m := range kernelName.FindAllStringSubmatch(kernelSource(), -1) {
		if !strings.HasPrefix(m[1], "__") { // a macro's "__launch_bounds__(" line
			names = append(names, m[1])
		}
	}
	for _, mr := range []int{1, 2, 4, 8} {
		for _, bits := range []int{4, 8} {
			for _, sb := range []string{"bf", "f32", "fp", "fp2"} {
				if sb == "fp2" && bits != 4 { // (nvfp4 only)
					continue
				}
				names = append(names, fmt.Sprintf("qgemv%d_%s_%d", bits, sb, mr))
				if mr == 1 {
					names = append(names, fmt.Sprintf("qgemv%d_%s_1_g64", bits, sb), fmt.Sprintf("qgemv%d_%s_1_g32", bits, sb))
				}
			}
		}
		for _, dt := range []string{"f32", "bf16", "f16"} {
			names = append(names, fmt.Sprintf("dgemv_%s_%d", dt, mr))
		}
	}
	names = append(names, multiKernels...)
	for _, nt := range []int{1, 2, 4} {
		names = append(names, fmt.Sprintf("qmma4_bf_%d", nt), fmt.Sprintf("qmma4_f32_%d", nt))
	}
	names = append(names, "qmma4_bf_1_xc", "qmma4_bf_2_xc")
	names = append(names, plan.QMMKernels()...)
	for _, hd := range []int{64, 128} {
		for _, k := range []string{"", "_h1", "_h2", "_h4", "_h1c", "_h2c", "_h4c"} {
			names = append(names, fmt.Sprintf("attn_decode_%d%s", hd, k))
		}
	}
	for _, hd := range []int{64, 128} { // over an E4M3 cache (kvStore.kern)
		for _, k := range []string{"", "_h1", "_h2", "_h4", "_h1c", "_h2c", "_h4c"} {
			names = append(names, fmt.Sprintf("attn_decode_%d%s_f8", hd, k))
		}
	}
	names = append(names, wideDecodeKernels...)
	names = append(names, "kv_store", "attention", "kv_store_f8", "attention_f8", "flash2_attn_64_f8", "flash2_attn_128_f8", "flash2_attn_256_f8",
		"flash2_attn_512_f8", "attn_dtile_64_f8", "attn_dtile_128_f8", "attn_dtile_256_f8")
	return append(names, "flash2_attn_64", "flash2_attn_128", "flash2_attn_256", "flash2_attn_512", "attn_dtile_64", "attn_dtile_128", "attn_dtile_256",
		"moe_gateup4_bf_o6", "moe_gateup4_bf_g64_o6", "moe_qmma4_bf", "moe_qmma4_f32", "moe_qmma4_fp", "moe_qmma4_fp2") // (two-argument __launch_bounds__: not matched by kernelName)
}

// wideDecodeKernels are attn_decode's head dim 256 and 512 kernels, f16
// and E4M3 (ATTN_DECODE_WIDE in kernels/attention.cu): no general kernel,
// no _h4 at 512 (plan.DecodeAttention caps their heads a block), and the
// KV-shared layers' _s forms.
var wideDecodeKernels = func() (n []string) {
	for _, hd := range []int{256, 512} {
		ks := []string{"_h1", "_h2", "_h1c", "_h2c", "_h1s", "_h2s"}
		if hd == 256 {
			ks = append(ks, "_h4", "_h4c", "_h4s")
		}
		for _, k := range ks {
			n = append(n, fmt.Sprintf("attn_decode_%d%s", hd, k), fmt.Sprintf("attn_decode_%d%s_f8", hd, k))
		}
	}
	return n
}()

// Function attributes (CUfunction_attribute).
const (
	funcAttrMaxDynamicSmem = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	funcAttrSmemCarveout   = 9 // CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
	// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
	funcAttrNonPortableCluster = 14
)

// optInDecodeTile gives attn_dtile_<hd><sfx> its dynamic shared memory.
func (b *Backend) optInDecodeTile(sfx string) map[int]bool {
	ok := map[int]bool{}
	for _, hd := range []int{64, 128, 256} {
		n := plan.DecodeTileSmem(hd)
		f := b.fns[fmt.Sprintf("attn_dtile_%d%s", hd, sfx)]
		if n > b.d.Attr(b.dev, cudalib.AttrMaxSmemOptin) ||
			b.d.Call("cuFuncSetAttribute", b.d.FuncSetAttribute, f, funcAttrMaxDynamicSmem, uintptr(n)) != nil {
			continue
		}
		ok[hd] = true
	}
	return ok
}

// optInClusters allows the _c decode attention kernels and attn_dtile clusters of 16
// blocks (8 is the portable limit) and returns the most it may launch.
func (b *Backend) optInClusters() int {
	var names []string
	for _, hd := range []int{64, 128} {
		for _, k := range []string{"decode_%d_h1c", "decode_%d_h2c", "decode_%d_h4c", "dtile_%d"} {
			names = append(names, "attn_"+fmt.Sprintf(k, hd))
		}
	}
	for _, n := range wideDecodeKernels { // (attn_dtile_256's clusters stay at 8: plan.DecodeTile)
		if strings.HasSuffix(n, "c") {
			names = append(names, n)
		}
	}
	for _, n := range names {
		for _, sfx := range []string{"", "_f8"} {
			if b.d.Call("cuFuncSetAttribute", b.d.FuncSetAttribute, b.fns[n+sfx], funcAttrNonPortableCluster, 1) != nil {
				return 8
			}
		}
	}
	return 16
}

// optInFlash2 lets the flash2 kernels use more than the default 48 KB of
// dynamic shared memory, and asks for the largest shared-memory carveout
// (the kernel reads nothing through L1 that matters). A head dim whose
// kernel the device refuses keeps flash_attn (64, 128) or the generic
// attention kernel (256, 512). sfx: "" the f16 kernels, "_f8" the E4M3 ones.
func (b *Backend) optInFlash2(sfx string) map[int]bool {
	ok := map[int]bool{}
	for _, hd := range []int{64, 128, 256, 512} {
		n := plan.Flash2Smem(hd)
		if n > b.d.Attr(b.dev, cudalib.AttrMaxSmemOptin) {
			continue
		}
		f := b.fns[fmt.Sprintf("flash2_attn_%d%s", hd, sfx)]
		if b.d.Call("cuFuncSetAttribute", b.d.FuncSetAttribute, f, funcAttrMaxDynamicSmem, uintptr(n)) != nil {
			continue
		}
		_ = b.d.Call("cuFuncSetAttribute", b.d.FuncSetAttribute, f, funcAttrSmemCarveout, 100) // a hint
		ok[hd] = true
	}
	return ok
}

func (b *Backend) fn(name string) uintptr {
	f, ok := b.fns[name]
	if !ok {
		panic("cuda: no kernel " + name) // a programming error
	}
	return f
}

// alloc takes device memory (cuMemAlloc: plain allocations only).
// alloc binds the context itself: ops record on whatever OS thread their
// goroutine runs on, and the arena grows from inside them (a cuMemAlloc
// on a thread where the context is not current fails with
// CUDA_ERROR_INVALID_CONTEXT, s18d).
func (b *Backend) alloc(n int) (uintptr, error) {
	defer b.bind()()
	var p uintptr
	if n <= 0 {
		n = 1
	}
	err := b.d.Call(fmt.Sprintf("cuMemAlloc(%d)", n), b.d.MemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n))
	if err != nil && cudalib.OutOfMemory(err) && b.dropPool() {
		err = b.d.Call(fmt.Sprintf("cuMemAlloc(%d)", n), b.d.MemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n))
	}
	if err != nil {
		return 0, err
	}
	return p, nil
}

func (b *Backend) allocPersistent(n int) (uintptr, error) {
	p, err := b.alloc(n)
	if err == nil {
		b.persistent = append(b.persistent, p)
	}
	return p, err
}

// htod copies host memory to the device through a pinned staging buffer:
// pinned copies run at full PCIe rate, and the driver never has to pin
// (or reject) Go heap pages itself.
func (b *Backend) htod(dst uintptr, src unsafe.Pointer, n int) error {
	if n == 0 {
		return nil
	}
	if b.pinned == nil {
		var hp *byte // a C address in a *byte: see check
		if err := b.d.Call("cuMemAllocHost", b.d.MemAllocHost, uintptr(unsafe.Pointer(&hp)), stagingBytes); err != nil {
			return err
		}
		b.pinned = unsafe.Slice(hp, stagingBytes)
	}
	s := unsafe.Slice((*byte)(src), n)
	for off := 0; off < n; off += stagingBytes {
		c := copy(b.pinned, s[off:])
		if err := b.d.Call("cuMemcpyHtoD", b.d.MemcpyHtoD, dst+uintptr(off), uintptr(unsafe.Pointer(&b.pinned[0])), uintptr(c)); err != nil {
			return fmt.Errorf("%w (copying %d bytes to %#x)", err, c, dst+uintptr(off))
		}
	}
	return nil
}

const stagingBytes = 64 << 20

// dtoh copies device memory to the host; large copies (a step's logits)
// go through the pinned staging buffer, which the DMA engine fills at full
// rate, instead of the driver's pageable path.
func (b *Backend) dtoh(dst unsafe.Pointer, src uintptr, n int) error {
	if n == 0 {
		return nil
	}
	defer b.idle.drained() // a copy to the host waits for the stream: nothing runs after it
	if n < 64<<10 || b.pinned == nil {
		return b.d.Call("cuMemcpyDtoH", b.d.MemcpyDtoH, uintptr(dst), src, uintptr(n))
	}
	d := unsafe.Slice((*byte)(dst), n)
	for off := 0; off < n; off += stagingBytes {
		c := min(stagingBytes, n-off)
		if err := b.d.Call("cuMemcpyDtoH", b.d.MemcpyDtoH, uintptr(unsafe.Pointer(&b.pinned[0])), src+uintptr(off), uintptr(c)); err != nil {
			return err
		}
		copy(d[off:off+c], b.pinned[:c])
	}
	return nil
}

// grow makes buf at least n bytes (contents are not kept). Recorded or
// running work may still use the old buffer, so it is flushed and waited
// for before the free; growth is rare (sizes only ratchet up).
func (b *Backend) grow(buf *devBuf, n int) error {
	if buf.size >= n {
		return nil
	}
	if buf.ptr != 0 {
		b.flush()
		b.fail(b.d.Call("cuStreamSynchronize", b.d.StreamSynchronize, b.strm))
		_ = b.d.Call("cuMemFree", b.d.MemFree, buf.ptr)
		buf.ptr, buf.size = 0, 0
	}
	n = max(n, 1<<16)
	p, err := b.alloc(n)
	if err != nil {
		return err
	}
	buf.ptr, buf.size = p, n
	return nil
}

func (b *Backend) Name() string { return "cuda" }

// DeviceName names the GPU: the backend is a backend.Accelerator.
func (b *Backend) DeviceName() string { return b.Device }

// Info describes the device and libraries in one line.
func (b *Backend) Info() string {
	return fmt.Sprintf("%s %s, %d SMs; libcuda %s; nvrtc %d.%d %s; cublas %s", b.Device, b.Arch, b.SMs,
		b.d.LibPath, b.nv.Major, b.nv.Minor, b.nv.LibPath, b.bl.LibPath)
}

// Sync runs everything recorded and waits for the device; it reports the
// first failure since the last Sync.
func (b *Backend) Sync() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	b.flush()
	b.fail(b.d.Call("cuStreamSynchronize", b.d.StreamSynchronize, b.strm))
	b.idle.drained()
	err := b.err
	b.err = nil
	return err
}

func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	b.flush()
	_ = b.d.Call("cuStreamSynchronize", b.d.StreamSynchronize, b.strm)
	b.graphs.clear(b)
	for _, p := range b.persistent {
		_ = b.d.Call("cuMemFree", b.d.MemFree, p)
	}
	for _, c := range b.arena.chunks {
		_ = b.d.Call("cuMemFree", b.d.MemFree, c.ptr)
	}
	b.closeAsync()
	for _, p := range []*devBuf{&b.stepBuf, &b.scratch, &b.scratchX, &b.wsBuf, &b.cntBuf, &b.feed, &b.tmaps.buf} {
		if p.ptr != 0 {
			_ = b.d.Call("cuMemFree", b.d.MemFree, p.ptr)
		}
	}
	b.persistent, b.arena = nil, arena{}
	if b.pinned != nil {
		_ = b.d.Call("cuMemFreeHost", b.d.MemFreeHost, uintptr(unsafe.Pointer(&b.pinned[0])))
		b.pinned = nil
	}
	b.unloadKernels()
	if b.bl.Handle != 0 {
		purego.SyscallN(b.bl.Destroy, b.bl.Handle)
		b.bl.Handle = 0
	}
	_ = b.d.Call("cuStreamDestroy", b.d.StreamDestroy, b.strm)
	return b.d.Call("cuDevicePrimaryCtxRelease", b.d.PrimaryCtxRelease, uintptr(b.dev))
}
