//go:build linux

package cuda

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/cudalib"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// Gated DeltaNet (backend.DeltaNetBackend) and the sigmoid gates of
// Qwen3.5 (FeatureSigmoidGate); the kernels are kernels/deltanet.cu.

// Limits of the kernels: the conv's taps live in registers (DN_KMAX) and
// a scan thread holds its column's key rows (deltanet_scan_256 at most).
const (
	deltaMaxConv = 8
	deltaMaxKDim = 256
	deltaThreads = 128 // DN_THREADS, DNC_THREADS
	deltaChunk   = 64  // DNC_L: positions a chunk of the chunked form
	deltaCols    = 32  // DNC_CT: value columns a chunked scan block
)

// deltaState is a recurrent layer's state in the KV store: per slot the
// last ConvKernel-1 conv inputs then VHeads [KDim, VDim] matrices, f32
// (rewritten every step, so rounding it would compound), laid out as the
// CPU backend keeps it, and after the slots the snapshot places
// (KVSpec.Snapshots, slotstate.go) in the same layout; and on the host the
// positions each slot and place has absorbed, to refuse a chunk that does
// not continue its sequence.
type deltaState struct {
	p    backend.DeltaNetParams
	ptr  uintptr
	pos  []int32 // slots, then snapshot places
	used []bool  // advanceDeltaSlots' scratch, one per slot
}

// deltaStateBytes is layer l's recurrent state in spec, its snapshot
// places included: none for other layers (backend.KVSizer counts it with
// the K/V).
func deltaStateBytes(spec backend.KVSpec, l backend.KVLayer) int64 {
	if !l.Recurrent() {
		return 0
	}
	return 4 * int64(spec.Slots+spec.Snapshots) * int64(l.DeltaNet.StateFloats())
}

// newDeltaState allocates layer's state, zeroed (a slot's state is also
// read as zero whenever its sequence starts at position 0). Call with
// the context bound.
func (b *Backend) newDeltaState(spec backend.KVSpec, l backend.KVLayer, layer int) (*deltaState, error) {
	p := l.DeltaNet
	if spec.Slots <= 0 {
		return nil, fmt.Errorf("cuda: layer %d keeps recurrent state per slot, but the KV spec has no slots", layer)
	}
	if p.KHeads <= 0 || p.VHeads%p.KHeads != 0 || p.KDim <= 0 || p.VDim <= 0 || p.ConvKernel < 1 || p.ChunkSize < 1 {
		return nil, fmt.Errorf("cuda: layer %d: invalid Gated DeltaNet shape %+v", layer, p)
	}
	if p.KDim > deltaMaxKDim || p.ConvKernel > deltaMaxConv {
		return nil, fmt.Errorf("cuda: layer %d: Gated DeltaNet key dim %d or conv kernel %d is over the kernels' %d and %d",
			layer, p.KDim, p.ConvKernel, deltaMaxKDim, deltaMaxConv)
	}
	n := deltaStateBytes(spec, l)
	ptr, err := b.allocPersistent(int(n))
	if err != nil {
		return nil, fmt.Errorf("cuda: KV store layer %d recurrent state (%d bytes): %v", layer, n, err)
	}
	b.fill(ptr, 0, int(n/4))
	return &deltaState{p: p, ptr: ptr, pos: make([]int32, spec.Slots+spec.Snapshots), used: make([]bool, spec.Slots)}, nil
}

// deltaScanKernel is the scan kernel for key dim kd (the smallest padded
// key dim KP that covers it) and the value columns one of its blocks
// serves.
func deltaScanKernel(kd int) (name string, cols int) {
	for _, kp := range []int{16, 32, 64, 128} {
		if kd <= kp {
			return fmt.Sprintf("deltanet_scan_%d", kp), deltaThreads / 4
		}
	}
	return "deltanet_scan_256", deltaThreads / 8
}

func (b *Backend) GatedDeltaNet(dst, qkv, a, bt backend.Tensor, w backend.DeltaNetWeights, kv backend.KVStore, layer int, p backend.DeltaNetParams) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.needStep("GatedDeltaNet")
	defer b.arenaRelease(b.markArena()) // staging and chunk scratch die with the op
	st, ok := kv.(*kvStore)
	if !ok {
		panic(fmt.Sprintf("cuda: KV store of type %T is not from the cuda backend", kv))
	}
	if layer < 0 || layer >= len(st.delta) || st.delta[layer] == nil || st.delta[layer].p != p {
		panic(fmt.Sprintf("cuda: layer %d has no Gated DeltaNet state of shape %+v", layer, p))
	}
	ds := st.delta[layer]
	o, in, at, btt := b.tt(dst), b.tt(qkv), b.tt(a), b.tt(bt)
	T, C, K, hv := b.step.tokens, p.Channels(), p.ConvKernel, p.VHeads
	if in.rows != T || o.rows != T || at.rows != T || btt.rows != T ||
		in.cols != C || o.cols != hv*p.VDim || at.cols != hv || btt.cols != hv {
		panic(fmt.Sprintf("cuda: GatedDeltaNet tensors qkv %dx%d, a %dx%d, b %dx%d, dst %dx%d for %d tokens of %+v",
			in.rows, in.cols, at.rows, at.cols, btt.rows, btt.cols, o.rows, o.cols, T, p))
	}
	conv, alog, dtb := b.wt(w.Conv), b.wt(w.ALog), b.wt(w.DtBias)
	if conv.quant || conv.experts*conv.out*conv.in != C*K || alog.out*alog.in != hv || dtb.out*dtb.in != hv ||
		alog.dtype != tensor.F32 || dtb.dtype != tensor.F32 {
		panic(fmt.Sprintf("cuda: GatedDeltaNet weights conv %v, A_log %v, dt_bias %v do not match %+v", conv.shape, alog.shape, dtb.shape, p))
	}
	b.advanceDeltaSlots(ds, layer)
	if T == 0 {
		return
	}
	xs, err := b.arenaAlloc(4 * T * C)
	if err != nil {
		b.fail(err)
		return
	}
	sf := p.StateFloats()
	b.newLaunch("deltanet_conv", (C+deltaThreads-1)/deltaThreads, b.step.ntiles, 1, deltaThreads).p(xs).p(in.ptr).
		p(conv.w).i(denseCode(conv.dtype)).p(ds.ptr).i(sf).p(b.step.tiles).p(b.step.pos).p(b.step.tok2seq).p(b.step.sinfo).i(C).i(K)
	// Sequences of cmin positions or more take the chunked form, the
	// others the recurrent scan; each kernel's blocks of the other kind's
	// sequences return at once, and a kind no sequence needs is not
	// launched.
	cmin, long, short := b.deltaChunkMin(p.KDim), false, false
	for _, s := range b.step.hostSeqs {
		long = long || s.Len >= cmin
		short = short || s.Len < cmin
	}
	var tb, pm, cum, invn uintptr
	if long {
		tb, pm, cum, invn, err = b.deltaChunkPrep(xs, at.ptr, btt.ptr, alog.w, dtb.w, cmin, T, p)
		if err != nil {
			b.fail(err)
			return
		}
	}
	if short {
		name, cols := deltaScanKernel(p.KDim)
		b.newLaunch(name, (p.VDim+cols-1)/cols, hv, b.step.seqs, deltaThreads).p(o.ptr).i(o.cols).p(xs).p(in.ptr).
			p(at.ptr).p(btt.ptr).p(alog.w).p(dtb.w).p(ds.ptr).i(sf).p(b.step.pos).p(b.step.sinfo).i(cmin).
			i(p.KHeads).i(hv).i(p.KDim).i(p.VDim).i(K)
	}
	if long {
		_, smem := deltaChunkSmem(p.KDim)
		l := b.newLaunch("deltanet_chunk_scan", (p.VDim+deltaCols-1)/deltaCols, hv, b.step.seqs, deltaThreads).p(o.ptr).
			i(o.cols).p(xs).p(in.ptr).p(tb).p(pm).p(cum).p(invn).p(ds.ptr).i(sf).p(b.step.pos).p(b.step.sinfo).i(cmin).
			i(p.KHeads).i(hv).i(p.KDim).i(p.VDim).i(K)
		l.smem = uint32(smem)
	}
}

// deltaChunkMin is the fewest positions of a sequence that take the
// chunked delta rule at key dim kd (math.MaxInt32: none, where the tuning
// turns it off or the device refused its kernels' shared memory).
func (b *Backend) deltaChunkMin(kd int) int {
	if b.DeltaChunkMin <= 0 || kd > b.deltaChunkKD {
		return math.MaxInt32
	}
	return b.DeltaChunkMin
}

// deltaChunkPrep records deltanet_chunk_prep over the step's flash query
// tiles (whole chunks of one sequence each) and returns its outputs: per
// row and value head a row of Tb and of P (deltaChunk floats each) and
// the cumulative log decay; per row and key head q's and k's norm factors.
func (b *Backend) deltaChunkPrep(xs, a, bt, alog, dtb uintptr, cmin, T int, p backend.DeltaNetParams) (tb, pm, cum, invn uintptr, err error) {
	rows := T * p.VHeads
	if tb, err = b.arenaAlloc(4 * rows * deltaChunk); err != nil {
		return
	}
	if pm, err = b.arenaAlloc(4 * rows * deltaChunk); err != nil {
		return
	}
	if cum, err = b.arenaAlloc(4 * rows); err != nil {
		return
	}
	if invn, err = b.arenaAlloc(4 * 2 * T * p.KHeads); err != nil {
		return
	}
	smem, _ := deltaChunkSmem(p.KDim)
	l := b.newLaunch("deltanet_chunk_prep", b.step.ntiles*(plan.FlashTile/deltaChunk), p.VHeads, 1, deltaThreads).
		p(tb).p(pm).p(cum).p(invn).p(xs).p(a).p(bt).p(alog).p(dtb).p(b.step.tiles).i(plan.FlashTile).p(b.step.tok2seq).
		p(b.step.sinfo).i(cmin).i(p.KHeads).i(p.VHeads).i(p.KDim).i(p.Channels())
	l.smem = uint32(smem)
	return
}

// deltaChunkSmem is the dynamic shared memory of deltanet_chunk_prep and
// deltanet_chunk_scan at key dim kd (kernels/deltanet_chunk.cu's
// layouts: q and k rows of the key dim padded to 64, +4; the 64x64
// matrices DNC_LD floats a row).
func deltaChunkSmem(kd int) (prep, scan int) {
	const ld = 68 // DNC_LD
	kp := (kd + 63) / 64 * 64
	qk := 2 * deltaChunk * (kp + 4)
	prep = 4 * (qk + 2*deltaChunk*ld + 2*deltaChunk)
	scan = 4 * (qk + kp*deltaCols + 3*deltaChunk*deltaCols + 2*deltaChunk*ld + 3*deltaChunk)
	return
}

// optInDeltaChunk gives the chunked kernels the shared memory of the
// largest key dim the device allows, 256 or else 128, and returns it (0:
// neither; every sequence then takes the recurrent scan).
func (b *Backend) optInDeltaChunk() int {
	for _, kd := range []int{deltaMaxKDim, 128} {
		prep, scan := deltaChunkSmem(kd)
		if scan > b.d.Attr(b.dev, cudalib.AttrMaxSmemOptin) {
			continue
		}
		if b.d.Call("cuFuncSetAttribute", b.d.FuncSetAttribute, b.fns["deltanet_chunk_prep"], funcAttrMaxDynamicSmem, uintptr(prep)) == nil &&
			b.d.Call("cuFuncSetAttribute", b.d.FuncSetAttribute, b.fns["deltanet_chunk_scan"], funcAttrMaxDynamicSmem, uintptr(scan)) == nil {
			return kd
		}
	}
	return 0
}

// advanceDeltaSlots checks the step's sequences against the positions
// their slots' states hold and moves them on: a wrong or repeated slot,
// or a chunk that does not continue its sequence, would silently mix
// states on the device, so it panics (as the CPU backend does; the engine
// turns the panic into an error for the step's requests).
func (b *Backend) advanceDeltaSlots(ds *deltaState, layer int) {
	clear(ds.used)
	for _, s := range b.step.hostSeqs {
		if s.Slot < 0 || s.Slot >= len(ds.used) || ds.used[s.Slot] {
			panic(fmt.Sprintf("cuda: layer %d: sequence slot %d is out of [0, %d) or used twice in one step", layer, s.Slot, len(ds.used)))
		}
		ds.used[s.Slot] = true
		first := b.step.hostPos[s.Start]
		if first != 0 && first != ds.pos[s.Slot] {
			panic(fmt.Sprintf("cuda: layer %d: a chunk at position %d, but slot %d's state holds %d positions", layer, first, s.Slot, ds.pos[s.Slot]))
		}
		ds.pos[s.Slot] = first + int32(s.Len)
	}
}

// gatedSigmoid is GatedAct with the Sigmoid activation: elementwise, or
// with a one-column gate scaling each row of up (dst may alias up).
func (b *Backend) gatedSigmoid(d, g, u *Tensor) {
	n := u.rows * u.cols
	row := g.cols == 1 && g.rows == u.rows && u.cols > 1
	if d.rows*d.cols != n || (!row && g.rows*g.cols != n) {
		panic(fmt.Sprintf("cuda: GatedAct Sigmoid of a %dx%d gate and %dx%d up into %dx%d", g.rows, g.cols, u.rows, u.cols, d.rows, d.cols))
	}
	if n == 0 {
		return
	}
	gcols := u.cols
	if row {
		gcols = 1
	}
	b.elementwise("gated_sigmoid", n).p(d.ptr).p(g.ptr).p(u.ptr).i64(n).i(u.cols).i(gcols)
}
