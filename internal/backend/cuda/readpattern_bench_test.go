//go:build linux

package cuda

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/cudalib"
)

// TestBenchReadPattern asks whether the many-row 4-bit products are slow
// because of the order in which they read the weights (issue 21,
// notes/cuda-session-17.md). qmm4_w128 reads, each step, 32 bytes (64
// 4-bit weights) of each of a block's 128 weight rows, rows 2 KB apart or
// more, and its time hardly moves with the row count or the ring's depth
// (s16a): the DRAM may be serving scattered 32-byte sectors at a fraction
// of its rate, which the one-row GEMV, streaming whole rows, does not see.
// The kernels here read a 4096x14336 4-bit matrix (the down projection,
// 29 MB in MLX's row-major words) with no math, in the GEMV's order
// (rows: a warp streams a row) and in the qmm order (slab<B>_d<D>: 256
// threads over 128 rows and a K range, B bytes of every row a step, D
// steps of loads in flight a thread), on the grid qmm4_w128 uses (128-row
// blocks by 8 K splits). If slab32 is far below rows at every depth, the
// layout is the limit (repacking the weights tile by tile, as Marlin does,
// is the fix, and rp_tile32 reads such a layout); if depth lifts it, it
// is latency.
func TestBenchReadPattern(t *testing.T) {
	o := benchEnabled(t)
	b := newOrSkip(t)
	defer b.Close()
	copyGB := copyRate(t, b, o)
	img, err := b.nv.Compile(readPatternSrc, "readpattern.cu", b.Arch, []string{"--std=c++17"})
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	unbind := b.bind()
	var mod uintptr
	err = b.d.Call("cuModuleLoadData", b.d.ModuleLoadData, uintptr(unsafe.Pointer(&mod)), uintptr(unsafe.Pointer(&img[0])))
	fn := func(name string) uintptr {
		var f uintptr
		cn := cudalib.CStr(name)
		r, _, _ := purego.SyscallN(b.d.ModuleGetFunction, uintptr(unsafe.Pointer(&f)), mod, uintptr(unsafe.Pointer(&cn[0])))
		if e := b.d.Check("cuModuleGetFunction "+name, r); e != nil {
			t.Fatal(e)
		}
		return f
	}
	const N, K = 4096, 14336 // weight rows, inputs: 4-bit words [N][K/8]
	const bytes = N * K / 2
	var w, sink uintptr
	if err == nil {
		w, err = b.alloc(bytes)
	}
	if err == nil {
		sink, err = b.alloc(256)
	}
	unbind()
	b.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		defer b.bind()()
		b.fail(b.d.Call("cuStreamSynchronize", b.d.StreamSynchronize, b.strm))
		_ = b.d.Call("cuMemFree", b.d.MemFree, w)
		_ = b.d.Call("cuMemFree", b.d.MemFree, sink)
		_ = b.d.Call("cuModuleUnload", b.d.ModuleUnload, mod)
	}()
	b.mu.Lock()
	b.fill(w, 1, bytes/4)
	b.mu.Unlock()
	tm := b.NewTimer()
	defer tm.Close()
	timeIt := func(launch func()) time.Duration {
		var best time.Duration
		for it := range 6 {
			tm.Start()
			b.mu.Lock()
			launch()
			b.mu.Unlock()
			if d := tm.Stop(); it > 0 && (best == 0 || d < best) {
				best = d
			}
		}
		return best
	}
	rowStride := K / 2 // bytes
	rows := fn("rp_rows")
	d := timeIt(func() {
		b.newLaunchFn(rows, "rp_rows", b.SMs*8, 1, 1, 256).p(w).i(rowStride / 16).i(N).p(sink)
	})
	o.add("readpattern", "rows", 1, fmt.Sprintf("%dx%d", N, K), float64(d.Nanoseconds())/1e3, bytes/d.Seconds()/1e9, bytes/d.Seconds()/1e9/copyGB, "a warp streams a row")
	const splits = 8
	for _, c := range []struct {
		kernel string
		step   int // bytes of a row a step
	}{{"rp_slab32_d1", 32}, {"rp_slab32_d2", 32}, {"rp_slab32_d4", 32}, {"rp_slab32_d8", 32},
		{"rp_slab128_d1", 128}, {"rp_slab128_d2", 128}, {"rp_slab512_d1", 512}, {"rp_tile32_d1", 32}, {"rp_tile32_d2", 32}} {
		f := fn(c.kernel)
		d := timeIt(func() {
			b.newLaunchFn(f, c.kernel, 1, N/128, splits, 256).p(w).i(rowStride).i(N).p(sink)
		})
		gb := bytes / d.Seconds() / 1e9
		note := fmt.Sprintf("%d B of each of 128 rows a step, K split %d ways", c.step, splits)
		if strings.HasPrefix(c.kernel, "rp_tile") {
			note += ", tiles repacked contiguous"
		}
		o.add("readpattern", c.kernel, 128, fmt.Sprintf("%dx%d", N, K), float64(d.Nanoseconds())/1e3, gb, gb/copyGB, note)
	}
	b.mu.Lock()
	err, b.err = b.err, nil
	b.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	o.print()
}

// readPatternSrc: the read-only kernels of TestBenchReadPattern. Every
// load feeds an xor that a store could need, so none is dropped.
const readPatternSrc = `
typedef unsigned int u32;
__device__ __forceinline__ u32 fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

extern "C" __global__ void rp_rows(const uint4* w, int row16, int rows, u32* sink) {
    const int lane = threadIdx.x & 31, warps = gridDim.x * blockDim.x / 32;
    u32 acc = 0;
    for (int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        const uint4* p = w + (long long)r * row16;
        for (int i = lane; i < row16; i += 32) acc ^= fold(p[i]);
    }
    if (acc == 0x9e3779b9u) sink[threadIdx.x] = acc;
}

// B bytes of each of the block's 128 rows a step (B/16 threads a row, so
// 256 threads cover 256*16/B rows at once and loop over the 128), D steps
// unrolled: D of a thread's loads in flight.
template <int B, int D>
__device__ void slab(const unsigned char* w, int stride, int rows, u32* sink) {
    constexpr int TPR = B / 16, RPP = 256 / TPR; // threads a row, rows a pass
    const int tid = threadIdx.x, r0 = blockIdx.y * 128, c = tid % TPR;
    const int steps = stride / B, s0 = steps * blockIdx.z / gridDim.z, s1 = steps * (blockIdx.z + 1) / gridDim.z;
    u32 acc = 0;
    for (int s = s0; s < s1; s += D) {
        uint4 v[D][128 / RPP > 0 ? 128 / RPP : 1];
#pragma unroll
        for (int d = 0; d < D; d++)
#pragma unroll
            for (int p = 0; p < 128 / RPP; p++) {
                const int r = min(r0 + p * RPP + tid / TPR, rows - 1), sd = min(s + d, s1 - 1);
                v[d][p] = *reinterpret_cast<const uint4*>(w + (long long)r * stride + (long long)sd * B + c * 16);
            }
#pragma unroll
        for (int d = 0; d < D; d++)
#pragma unroll
            for (int p = 0; p < 128 / RPP; p++) acc ^= fold(v[d][p]);
    }
    if (acc == 0x9e3779b9u) sink[tid] = acc;
}
#define RP(B, D) extern "C" __global__ void __launch_bounds__(256, 2) rp_slab##B##_d##D(const unsigned char* w, int stride, int rows, u32* sink) { slab<B, D>(w, stride, rows, sink); }
RP(32, 1) RP(32, 2) RP(32, 4) RP(32, 8) RP(128, 1) RP(128, 2) RP(512, 1)

// The same steps from weights repacked tile by tile: a block's 128 rows x
// 32 bytes of one step are 4 KB in a row ([row block][step][4 KB]), so a
// step is one coalesced 16-byte load a thread.
template <int D>
__device__ void tile(const unsigned char* w, int stride, int rows, u32* sink) {
    const int tid = threadIdx.x, steps = stride / 32;
    const int s0 = steps * blockIdx.z / gridDim.z, s1 = steps * (blockIdx.z + 1) / gridDim.z;
    const unsigned char* base = w + (long long)blockIdx.y * steps * 4096;
    u32 acc = 0;
    for (int s = s0; s < s1; s += D) {
        uint4 v[D];
#pragma unroll
        for (int d = 0; d < D; d++) v[d] = *reinterpret_cast<const uint4*>(base + (long long)min(s + d, s1 - 1) * 4096 + tid * 16);
#pragma unroll
        for (int d = 0; d < D; d++) acc ^= fold(v[d]);
    }
    if (acc == 0x9e3779b9u) sink[tid] = acc;
}
extern "C" __global__ void __launch_bounds__(256, 2) rp_tile32_d1(const unsigned char* w, int stride, int rows, u32* sink) { tile<1>(w, stride, rows, sink); }
extern "C" __global__ void __launch_bounds__(256, 2) rp_tile32_d2(const unsigned char* w, int stride, int rows, u32* sink) { tile<2>(w, stride, rows, sink); }
`
