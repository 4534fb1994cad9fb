//go:build linux

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// TestRecordDeltaNet checks, without a GPU, what GatedDeltaNet and the
// sigmoid gates record for a step of three sequences (a 150-token prefill,
// a decode token, a 2-token chunk): the kernels by key dim, their grids,
// and every launch's arguments against its kernel's parameters in number
// and kind (the kernels themselves are checked on the device by the
// conformance suite).
func TestRecordDeltaNet(t *testing.T) {
	sigs := kernelSignatures(t)
	for _, c := range []struct {
		p          backend.DeltaNetParams
		kernel     string
		cols, grid int
	}{
		{backend.DeltaNetParams{KHeads: 2, VHeads: 4, KDim: 16, VDim: 16, ConvKernel: 4, ChunkSize: 64}, "deltanet_scan_16", 32, 1},
		{backend.DeltaNetParams{KHeads: 1, VHeads: 3, KDim: 24, VDim: 40, ConvKernel: 3, ChunkSize: 64}, "deltanet_scan_32", 32, 2},
		{backend.DeltaNetParams{KHeads: 16, VHeads: 32, KDim: 128, VDim: 128, ConvKernel: 4, ChunkSize: 64}, "deltanet_scan_128", 32, 4},
		{backend.DeltaNetParams{KHeads: 1, VHeads: 1, KDim: 200, VDim: 20, ConvKernel: 2, ChunkSize: 64}, "deltanet_scan_256", 16, 2},
	} {
		t.Run(fmt.Sprintf("k%d", c.p.KDim), func(t *testing.T) {
			b := hostOnlyBackend()
			batch := &backend.Batch{Seqs: []backend.SeqSlice{{Start: 0, Len: 150, Slot: 2}, {Start: 150, Len: 1, Slot: 0}, {Start: 151, Len: 2, Slot: 1}}}
			for _, s := range batch.Seqs {
				for i := range s.Len {
					batch.Positions = append(batch.Positions, int32(i))
				}
			}
			T, C, hv := len(batch.Positions), c.p.Channels(), c.p.VHeads
			b.step = stepInfo{tokens: T, seqs: 3, ntiles: 4, tiles: 0x200, pos: 0x104, tok2seq: 0x108, sinfo: 0x300,
				hostSeqs: batch.Seqs, hostPos: batch.Positions}
			ds := &deltaState{p: c.p, ptr: 1 << 40, pos: make([]int32, 3), used: make([]bool, 3)}
			kv := &kvStore{spec: backend.KVSpec{Slots: 3, Layers: []backend.KVLayer{{DeltaNet: c.p}}}, k: []uintptr{0}, v: []uintptr{0},
				delta: []*deltaState{ds}}
			ten := func(cols int) *Tensor { return &Tensor{ptr: 1 << 30, rows: T, cols: cols} }
			vec := &weight{shape: []int{hv}, experts: 1, out: 1, in: hv, dtype: tensor.F32, w: 0x5000}
			w := backend.DeltaNetWeights{Conv: &weight{shape: []int{C, 1, c.p.ConvKernel}, experts: C, out: 1, in: c.p.ConvKernel,
				dtype: tensor.BF16, w: 0x4000}, ALog: vec, DtBias: vec}
			b.GatedDeltaNet(ten(hv*c.p.VDim), ten(C), ten(hv), ten(hv), w, kv, 0, c.p)
			b.gatedSigmoid(ten(64), ten(64), ten(64))
			b.gatedSigmoid(ten(64), ten(1), ten(64))
			names := launchNames(b)
			if strings.Join(names, " ") != "deltanet_conv "+c.kernel+" gated_sigmoid gated_sigmoid" {
				t.Fatalf("launches %v", names)
			}
			ls := b.rec.ls
			if int(ls[0].gx) != (C+127)/128 || ls[0].gy != 4 || ls[0].block != deltaThreads {
				t.Errorf("conv grid %dx%d of %d threads, want %dx4 of 128", ls[0].gx, ls[0].gy, ls[0].block, (C+127)/128)
			}
			if int(ls[1].gx) != c.grid || int(ls[1].gy) != hv || ls[1].gz != 3 || ls[1].block != deltaThreads {
				t.Errorf("scan grid %dx%dx%d of %d threads, want %dx%dx3 of 128", ls[1].gx, ls[1].gy, ls[1].gz, ls[1].block, c.grid, hv)
			}
			if _, cols := deltaScanKernel(c.p.KDim); cols != c.cols {
				t.Errorf("%d columns a scan block, want %d", cols, c.cols)
			}
			if g := int32(ls[3].args[5]); g != 1 || int32(ls[2].args[5]) != 64 {
				t.Errorf("gated_sigmoid gate widths %d and %d, want 64 and 1", int32(ls[2].args[5]), g)
			}
			for i, name := range names {
				l, want := &ls[i], sigs[name]
				if int(l.n) != len(want) {
					t.Errorf("%s with %d arguments, its kernel declares %d", name, l.n, len(want))
					continue
				}
				for a, k := range want {
					if l.kind(a) != k {
						t.Errorf("%s argument %d passed as kind %d, declared %d", name, a, l.kind(a), k)
					}
				}
			}
			if ds.pos[2] != 150 || ds.pos[0] != 1 || ds.pos[1] != 2 {
				t.Errorf("slot positions %v after the step, want [1 2 150]", ds.pos)
			}
		})
	}
}

// TestDeltaNetSlotChecks: a chunk that does not continue its slot's
// positions, or two sequences in one slot, is refused at record time.
func TestDeltaNetSlotChecks(t *testing.T) {
	p := backend.DeltaNetParams{KHeads: 1, VHeads: 1, KDim: 16, VDim: 16, ConvKernel: 4, ChunkSize: 64}
	for _, c := range []struct {
		name string
		seqs []backend.SeqSlice
		pos  []int32
		want string
	}{
		{"gap", []backend.SeqSlice{{Start: 0, Len: 1, Slot: 0}}, []int32{5}, "slot 0's state holds 3 positions"},
		{"slot twice", []backend.SeqSlice{{Start: 0, Len: 1, Slot: 1}, {Start: 1, Len: 1, Slot: 1}}, []int32{0, 0}, "used twice"},
		{"slot out of range", []backend.SeqSlice{{Start: 0, Len: 1, Slot: 2}}, []int32{0}, "out of [0, 2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hostOnlyBackend()
			b.step = stepInfo{hostSeqs: c.seqs, hostPos: c.pos}
			ds := &deltaState{p: p, pos: []int32{3, 0}, used: make([]bool, 2)}
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, c.want) {
					t.Errorf("panic %v, want one saying %q", r, c.want)
				}
			}()
			b.advanceDeltaSlots(ds, 0)
		})
	}
}

// TestKVStoreBytesRecurrent: the recurrent state is counted per slot, f32,
// outside the part that grows with the blocks; its layers keep no K/V.
func TestKVStoreBytesRecurrent(t *testing.T) {
	p := backend.DeltaNetParams{KHeads: 16, VHeads: 32, KDim: 128, VDim: 128, ConvKernel: 4, ChunkSize: 64}
	spec := backend.KVSpec{Slots: 8, BlockSize: 16, Layers: []backend.KVLayer{{DeltaNet: p}, {KVHeads: 2, HeadDim: 256}, {DeltaNet: p}}}
	b := &Backend{}
	cost := backend.KVCostOf(b, spec)
	state := int64(8 * 4 * ((4-1)*(2*16*128+32*128) + 32*128*128))
	if cost.Fixed != 2*state || cost.PerBlock != 2*16*2*256*2 {
		t.Errorf("KV cost %+v, want fixed %d (the state of two layers) and %d a block", cost, 2*state, 2*16*2*256*2)
	}
}

// TestFeatures: the features the backend declares (every one of them has
// conformance cases that then run on it), and one it does not.
func TestFeatures(t *testing.T) {
	for f, want := range map[backend.Feature]bool{backend.FeatureGatedDeltaNet: true, backend.FeatureSigmoidGate: true,
		backend.FeatureFPQuant: true, backend.FeatureExpertShard: false} {
		if (&Backend{}).Supports(f) != want {
			t.Errorf("Supports(%q) = %v", f, !want)
		}
	}
}
