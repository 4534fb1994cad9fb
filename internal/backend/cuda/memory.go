//go:build linux

package cuda

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"unsafe"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// Tensor is a row-major float32 matrix in device memory. Activations stay
// f32 on the device: decode reads far more weight bytes than activation
// bytes, and f32 keeps every op within rounding of the CPU reference.
type Tensor struct {
	ptr        uintptr
	rows, cols int
	owner      *Tensor // views and slices keep their allocation alive
}

func (t *Tensor) Rows() int { return t.rows }
func (t *Tensor) Cols() int { return t.cols }

// arena is bump allocation over a list of chunks for ops' internal scratch
// (attention partials, MoE routing, argmax ids), rewound every BeginStep
// and, for ops whose scratch dies with them, at the op's end (markArena):
// the same op sequence then gets the same addresses every step, which keeps
// its launches, and so its graph, identical.
type arena struct {
	chunks   []devBuf
	cur, off int
	top      arenaMark // the furthest position taken since the rewind (arenaAllocFresh)
}

const arenaAlign = 256

func (a *arena) reset() { a.cur, a.off, a.top = 0, 0, arenaMark{} }

// arenaMark is a position in the step arena.
type arenaMark struct{ cur, off int }

func (m arenaMark) after(o arenaMark) bool { return m.cur > o.cur || m.cur == o.cur && m.off > o.off }

// markArena marks the arena for an op whose scratch dies with it, and
// arenaRelease gives everything taken after the mark back, so the next op
// (the next layer's) reuses it: its kernels run after this op's on the one
// stream, in a captured graph too. Without it a step held every layer's
// scratch at once: a Qwen3-30B-A3B prefill step of 8k tokens took ~1 GB
// of MoE scratch per layer, 48 GB in all, and serving with the KV cache
// sized from memory ran out of it (s15d/e). Values, not a closure: ops
// call it on every layer of every step.
func (b *Backend) markArena() arenaMark { return arenaMark{b.arena.cur, b.arena.off} }

func (b *Backend) arenaRelease(m arenaMark) { b.arena.cur, b.arena.off = m.cur, m.off }

// arenaAlloc takes n bytes of op scratch from the step arena, growing it
// by a chunk when full. Outside a step the arena is simply not rewound
// until the first BeginStep, which flushes everything recorded before it
// rewinds.
func (b *Backend) arenaAlloc(n int) (uintptr, error) {
	a := &b.arena
	n = (n + arenaAlign - 1) / arenaAlign * arenaAlign
	for a.cur < len(a.chunks) {
		c := a.chunks[a.cur]
		if a.off+n <= c.size {
			p := c.ptr + uintptr(a.off)
			a.off += n
			a.raiseTop()
			return p, nil
		}
		a.cur++
		a.off = 0
	}
	size := max(n, 64<<20)
	p, err := b.alloc(size)
	if err != nil {
		return 0, err
	}
	a.chunks = append(a.chunks, devBuf{p, size})
	a.cur = len(a.chunks) - 1
	a.off = n
	a.raiseTop()
	return p, nil
}

func (a *arena) raiseTop() {
	if m := (arenaMark{a.cur, a.off}); m.after(a.top) {
		a.top = m
	}
}

// arenaAllocFresh takes n bytes that no launch of this step has named: a
// copy queued on the stream ahead of the launches still being recorded
// may write them. Memory an op gave back (arenaRelease) does not qualify,
// since the recorded launches that used it have not run yet.
func (b *Backend) arenaAllocFresh(n int) (uintptr, error) {
	b.arena.cur, b.arena.off = b.arena.top.cur, b.arena.top.off
	return b.arenaAlloc(n)
}

// tensorPool recycles the memory of tensors the garbage collector has
// dropped. A cleanup queues the address; BeginStep moves the queue into
// the pool once the work recorded so far is on the stream, so a later
// kernel that reuses the memory runs after every kernel that used it (one
// stream, in order).
type tensorPool struct {
	mu       sync.Mutex
	released []devBuf
	free     map[int][]uintptr
}

func (p *tensorPool) release(d devBuf) {
	p.mu.Lock()
	p.released = append(p.released, d)
	p.mu.Unlock()
}

func (p *tensorPool) recycle() {
	p.mu.Lock()
	rel := p.released
	p.released = nil
	p.mu.Unlock()
	if p.free == nil {
		p.free = map[int][]uintptr{}
	}
	for _, d := range rel {
		p.free[d.size] = append(p.free[d.size], d.ptr)
	}
}

// tensorClass is the pool's size class of an n-byte tensor: 256-byte
// multiples up to 1 MiB, then eighths of a power of two (at most 12.5%
// over), so steps of varying token counts reuse each other's buffers
// instead of each size keeping its own.
func tensorClass(n int) int {
	n = (max(n, 4) + arenaAlign - 1) / arenaAlign * arenaAlign
	if n <= 1<<20 {
		return n
	}
	step := 1 << (bits.Len(uint(n)) - 4) // an eighth of the power of two below n
	return (n + step - 1) / step * step
}

// dropPool gives the pool's idle buffers back to the driver once the
// queued work is done, and forgets the graphs that named them; false when
// it held none. alloc calls it when the device is out of memory.
func (b *Backend) dropPool() bool {
	free := map[uintptr]bool{}
	for _, l := range b.pool.free {
		for _, p := range l {
			free[p] = true
		}
	}
	if len(free) == 0 {
		return false
	}
	b.flush()
	if err := b.d.Call("cuStreamSynchronize", b.d.StreamSynchronize, b.strm); err != nil {
		b.fail(err)
		return false
	}
	b.pool.free = map[int][]uintptr{}
	b.freePersistent(free)
	b.graphs.clear(b)
	return true
}

// freePersistent frees the persistent allocations in free (the stream
// synchronized by the caller) and drops them from the list Close frees.
func (b *Backend) freePersistent(free map[uintptr]bool) {
	kept := b.persistent[:0]
	for _, p := range b.persistent {
		if free[p] {
			if err := b.d.Call("cuMemFree", b.d.MemFree, p); err != nil {
				b.fail(err)
			}
			continue
		}
		kept = append(kept, p)
	}
	b.persistent = kept
}

// NewTensor returns a zeroed matrix that lives as long as the Go value (or
// a view of it). Model code that keeps its activation buffers across
// steps gets the same addresses every step, which is what graph replay
// needs; code that allocates per step still works, launching directly
// when the addresses differ.
func (b *Backend) NewTensor(rows, cols int) backend.Tensor {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := tensorClass(rows * cols * 4)
	t := &Tensor{rows: rows, cols: cols}
	if l := b.pool.free[n]; len(l) > 0 {
		t.ptr = l[len(l)-1]
		b.pool.free[n] = l[:len(l)-1]
	} else {
		unbind := b.bind()
		p, err := b.allocPersistent(n)
		unbind()
		if err != nil {
			panic(fmt.Sprintf("cuda: NewTensor(%d, %d): %v", rows, cols, err))
		}
		t.ptr = p
	}
	runtime.AddCleanup(t, b.pool.release, devBuf{t.ptr, n})
	if rows*cols > 0 {
		b.fill(t.ptr, 0, rows*cols)
	}
	return t
}

// tt checks that x is a tensor of this backend.
func (b *Backend) tt(x backend.Tensor) *Tensor {
	t, ok := x.(*Tensor)
	if !ok {
		panic(fmt.Sprintf("cuda: tensor of type %T is not from the cuda backend", x))
	}
	return t
}

func (t *Tensor) base() *Tensor {
	if t.owner != nil {
		return t.owner
	}
	return t
}

func (b *Backend) View(x backend.Tensor, rows, cols int) backend.Tensor {
	t := b.tt(x)
	if rows*cols > t.rows*t.cols {
		panic(fmt.Sprintf("cuda: view %dx%d of a %dx%d tensor", rows, cols, t.rows, t.cols))
	}
	return &Tensor{ptr: t.ptr, rows: rows, cols: cols, owner: t.base()}
}

func (b *Backend) Slice(x backend.Tensor, from, to int) backend.Tensor {
	t := b.tt(x)
	if from < 0 || to > t.rows || from > to {
		panic(fmt.Sprintf("cuda: slice [%d,%d) of %d rows", from, to, t.rows))
	}
	return &Tensor{ptr: t.ptr + uintptr(from*t.cols*4), rows: to - from, cols: t.cols, owner: t.base()}
}

// weight is a parameter in device memory. Dense matrices keep their
// checkpoint dtype (bf16 stays 2 bytes a weight); vectors (norms, biases)
// become f32. Quantized matrices keep MLX's packed words as they are, and
// their scales and biases are interleaved per group: one 4-byte load for
// bf16 sources, an 8-byte float2 for f16 and f32 sources.
type weight struct {
	shape              []int
	experts, out, in   int
	dtype              tensor.DType // dense: F32, BF16 or F16
	quant              bool
	bits, group, gshft int
	sbF32              bool
	fp                 bool // a floating-point mode (mxfp4, nvfp4, mxfp8): SBfp scales, no biases
	fpPair             bool // nvfp4 as SBfp2: a u32 holds two groups' scales (fpquant.go)
	w, sb              uintptr
	bytes              int
}

func (w *weight) Shape() []int    { return w.shape }
func (w *weight) Quantized() bool { return w.quant }

// wordsPerRow is the packed row length in u32 words.
func (w *weight) wordsPerRow() int { return (w.in*w.bits + 31) / 32 }

func (b *Backend) UploadWeight(h *tensor.Host) (backend.Weight, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	n := 1
	for _, d := range h.Shape {
		n *= d
	}
	w := &weight{shape: append([]int(nil), h.Shape...), experts: 1}
	switch len(h.Shape) {
	case 1:
		w.out, w.in = 1, h.Shape[0]
	case 2:
		w.out, w.in = h.Shape[0], h.Shape[1]
	case 3:
		w.experts, w.out, w.in = h.Shape[0], h.Shape[1], h.Shape[2]
	default:
		return nil, fmt.Errorf("%s: unsupported shape %v", h.Name, h.Shape)
	}
	if h.Quant == nil {
		return w, b.uploadDense(w, h, n)
	}
	q := h.Quant
	if quant.IsFP(q.Mode) {
		return w, b.uploadFP(w, h)
	}
	if q.Mode != "" && q.Mode != quant.Affine {
		return nil, fmt.Errorf("%s: unknown quantization mode %q", h.Name, q.Mode)
	}
	if q.GroupSize <= 0 || q.GroupSize&(q.GroupSize-1) != 0 || w.in%q.GroupSize != 0 || q.Bits < 1 || q.Bits > 8 {
		return nil, fmt.Errorf("%s: unsupported quantization %d bits, group %d for %d inputs", h.Name, q.Bits, q.GroupSize, w.in)
	}
	w.quant, w.bits, w.group = true, q.Bits, q.GroupSize
	for 1<<w.gshft < q.GroupSize {
		w.gshft++
	}
	rows := w.experts * w.out
	nw, ng := w.wordsPerRow(), w.in/q.GroupSize
	if len(h.Data) != rows*nw*4 || len(q.Scales) != rows*ng*q.ScaleDType.Size() || len(q.Biases) != len(q.Scales) {
		return nil, fmt.Errorf("%s: quantized data sizes do not match shape %v at %d bits, group %d", h.Name, h.Shape, q.Bits, q.GroupSize)
	}
	var sb []byte
	switch q.ScaleDType {
	case tensor.BF16:
		sb = make([]byte, rows*ng*4)
		for i := 0; i < rows*ng; i++ {
			copy(sb[4*i:], q.Scales[2*i:2*i+2])
			copy(sb[4*i+2:], q.Biases[2*i:2*i+2])
		}
	case tensor.F16, tensor.F32:
		w.sbF32 = true
		s, bi := make([]float32, rows*ng), make([]float32, rows*ng)
		if err := tensor.ToFloat32(s, q.Scales, q.ScaleDType); err != nil {
			return nil, fmt.Errorf("%s scales: %v", h.Name, err)
		}
		if err := tensor.ToFloat32(bi, q.Biases, q.ScaleDType); err != nil {
			return nil, fmt.Errorf("%s biases: %v", h.Name, err)
		}
		sb = make([]byte, rows*ng*8)
		for i := range s {
			putF32(sb[8*i:], s[i])
			putF32(sb[8*i+4:], bi[i])
		}
	default:
		return nil, fmt.Errorf("%s: scales of type %s are not supported", h.Name, q.ScaleDType)
	}
	return w, b.uploadPacked(w, h.Name, h.Data, sb)
}

// uploadPacked copies a quantized weight's packed codes and its scale
// words to the device.
func (b *Backend) uploadPacked(w *weight, name string, data, sb []byte) error {
	var err error
	if w.w, err = b.allocPersistent(len(data)); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	if w.sb, err = b.allocPersistent(len(sb)); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	if err := b.htod(w.w, unsafe.Pointer(&data[0]), len(data)); err != nil {
		return err
	}
	if err := b.htod(w.sb, unsafe.Pointer(&sb[0]), len(sb)); err != nil {
		return err
	}
	w.bytes = len(data) + len(sb)
	return nil
}

func putF32(b []byte, f float32) {
	u := math.Float32bits(f)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

func (b *Backend) uploadDense(w *weight, h *tensor.Host, n int) error {
	data := h.Data
	w.dtype = h.DType
	// Vectors are read by many small kernels: f32 keeps them simple. f64
	// (rare) has no kernel of its own.
	if len(h.Shape) == 1 || (h.DType != tensor.BF16 && h.DType != tensor.F16 && h.DType != tensor.F32) {
		f := make([]float32, n)
		if err := tensor.ToFloat32(f, h.Data, h.DType); err != nil {
			return fmt.Errorf("%s: %v", h.Name, err)
		}
		data = unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*n)
		w.dtype = tensor.F32
	}
	if len(data) < n*w.dtype.Size() {
		return fmt.Errorf("%s: %d bytes for %d elements of %s", h.Name, len(data), n, w.dtype)
	}
	var err error
	if w.w, err = b.allocPersistent(n * w.dtype.Size()); err != nil {
		return fmt.Errorf("%s: %v", h.Name, err)
	}
	w.bytes = n * w.dtype.Size()
	return b.htod(w.w, unsafe.Pointer(&data[0]), w.bytes)
}

func (b *Backend) wt(x backend.Weight) *weight {
	w, ok := x.(*weight)
	if !ok {
		panic(fmt.Sprintf("cuda: weight of type %T is not from the cuda backend", x))
	}
	return w
}

// kvStore holds each layer's K and V caches, [block][kvHead][slot][dim] f16
// (kernels/attention.cu says why).
type kvStore struct {
	spec  backend.KVSpec
	k, v  []uintptr
	delta []*deltaState // per layer: recurrent state (ops_deltanet.go), or nil
	f8    bool          // K and V are E4M3 codes (--kv-cache-dtype fp8), else f16
}

// kern is the attention kernel name for this store's element: the
// f16 kernel's name, or its _f8 twin over E4M3 codes.
func (s *kvStore) kern(name string) string {
	if s.f8 {
		return name + "_f8"
	}
	return name
}

func (s *kvStore) Spec() backend.KVSpec { return s.spec }

// FreeKVStore gives kv's device memory back (backend.KVFreer) once the
// queued work is done; kv must not be used afterwards. Captured graphs
// that name its addresses are dropped, so a later store at the same
// addresses is recorded afresh.
func (b *Backend) FreeKVStore(kv backend.KVStore) error {
	s, ok := kv.(*kvStore)
	if !ok {
		return fmt.Errorf("cuda: KV store of type %T is not from the cuda backend", kv)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	b.flush()
	if err := b.d.Call("cuStreamSynchronize", b.d.StreamSynchronize, b.strm); err != nil {
		return err
	}
	free := map[uintptr]bool{}
	for i := range s.k {
		free[s.k[i]], free[s.v[i]] = true, true
		if s.delta[i] != nil {
			free[s.delta[i].ptr] = true
		}
	}
	delete(free, 0)
	b.freePersistent(free)
	b.graphs.clear(b)
	s.k, s.v, s.delta = nil, nil, nil
	return b.err
}

// KVElemBytes: the cache holds f16 at --kv-cache-dtype auto
// (backend.KVElemSizer); kvElem is the size at any dtype.
func (b *Backend) KVElemBytes() int { return 2 }

// checkKVDtype refuses every dtype the attention kernels do not read:
// they read f16 (auto) and E4M3 codes (fp8); bf16 would need the bf16 mma
// in the tile kernels and f32 twice the f16 bytes for nothing.
func checkKVDtype(d backend.KVDtype) error {
	switch d.Or(backend.KVAuto) {
	case backend.KVAuto, backend.KVFP8:
		return nil
	}
	return fmt.Errorf("cuda: --kv-cache-dtype %s is not supported: the CUDA KV cache stores f16 (auto) or fp8 (E4M3), which its attention kernels read", d)
}

// kvElem is one K or V value's bytes in a store of dtype d (checked).
func kvElem(d backend.KVDtype) int {
	if d.Or(backend.KVAuto) == backend.KVFP8 {
		return 1
	}
	return 2
}

func (b *Backend) NewKVStore(spec backend.KVSpec) (backend.KVStore, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	if spec.NumBlocks <= 0 || spec.BlockSize <= 0 {
		return nil, fmt.Errorf("cuda: KV store needs positive block count and size")
	}
	if err := checkKVDtype(spec.Dtype); err != nil {
		return nil, err
	}
	s := &kvStore{spec: spec, delta: make([]*deltaState, len(spec.Layers)), f8: kvElem(spec.Dtype) == 1}
	for i, l := range spec.Layers {
		if l.HeadDim > 512 {
			return nil, fmt.Errorf("cuda: layer %d head dim %d is over 512", i, l.HeadDim)
		}
		if l.Recurrent() {
			ds, err := b.newDeltaState(spec, l, i)
			if err != nil {
				return nil, err
			}
			s.k, s.v, s.delta[i] = append(s.k, 0), append(s.v, 0), ds
			continue
		}
		if l.Shared { // attends over an earlier layer's K/V (FeatureSharedKV)
			s.k, s.v = append(s.k, 0), append(s.v, 0)
			continue
		}
		n := b.kvLayerBytes(spec, l)
		k, err := b.allocPersistent(n)
		if err != nil {
			return nil, fmt.Errorf("cuda: KV store layer %d: %v", i, err)
		}
		v, err := b.allocPersistent(n)
		if err != nil {
			return nil, fmt.Errorf("cuda: KV store layer %d: %v", i, err)
		}
		s.k, s.v = append(s.k, k), append(s.v, v)
	}
	return s, nil
}

// kvLayerBytes is one of layer l's K and V caches: every layer paged, in
// f16 or E4M3 (the store keeps no rings); none for a shared layer (it
// reads an earlier layer's) or a recurrent one, whose state
// deltaStateBytes counts.
func (b *Backend) kvLayerBytes(spec backend.KVSpec, l backend.KVLayer) int {
	if l.Recurrent() || l.Shared {
		return 0
	}
	return spec.NumBlocks * spec.BlockSize * l.KVHeads * l.HeadDim * kvElem(spec.Dtype)
}

// KVStoreBytes is what NewKVStore(spec) allocates (backend.KVSizer).
func (b *Backend) KVStoreBytes(spec backend.KVSpec) int64 {
	var n int64
	for _, l := range spec.Layers {
		n += 2*int64(b.kvLayerBytes(spec, l)) + deltaStateBytes(spec, l)
	}
	return n
}

// MemoryInfo reports the device's free and total memory (cuMemGetInfo):
// the backend is a backend.MemoryReporter, for the memory preflight.
func (b *Backend) MemoryInfo() (free, total int64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.bind()()
	var f, t uint64
	err = b.d.Call("cuMemGetInfo", b.d.MemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))
	return int64(f), int64(t), err
}
