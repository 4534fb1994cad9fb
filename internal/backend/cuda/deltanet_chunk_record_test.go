//go:build linux

package cuda

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// TestRecordDeltaChunk checks, without a GPU, which of the delta rule's
// kernels GatedDeltaNet records for steps of long and short sequences:
// the chunked pair for sequences of DeltaChunkMin positions or more, the
// recurrent scan for the rest, neither kind where no sequence needs it,
// none of the chunked form where the tuning turns it off or the device
// did not grant its shared memory; their grids, shared memory, the cmin
// each is passed, and every argument against its kernel's parameters.
func TestRecordDeltaChunk(t *testing.T) {
	sigs := kernelSignatures(t)
	p := backend.DeltaNetParams{KHeads: 16, VHeads: 32, KDim: 128, VDim: 128, ConvKernel: 4, ChunkSize: 64}
	const chunked = "deltanet_conv deltanet_chunk_prep deltanet_chunk_scan"
	for _, c := range []struct {
		name    string
		lens    []int
		min, kd int // Tuning.DeltaChunkMin, deltaChunkKD
		want    string
		cmin    int // passed to the kernels
	}{
		{"mixed", []int{150, 1, 40}, 32, 256, "deltanet_conv deltanet_chunk_prep deltanet_scan_128 deltanet_chunk_scan", 32},
		{"long", []int{300, 32}, 32, 256, chunked, 32},
		{"short", []int{31, 1, 1}, 32, 256, "deltanet_conv deltanet_scan_128", 32},
		{"off", []int{300, 1}, 0, 256, "deltanet_conv deltanet_scan_128", math.MaxInt32},
		{"not granted", []int{300, 1}, 32, 0, "deltanet_conv deltanet_scan_128", math.MaxInt32},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hostOnlyBackend()
			b.DeltaChunkMin, b.deltaChunkKD = c.min, c.kd
			batch := &backend.Batch{}
			ntiles := 0
			for s, n := range c.lens {
				batch.Seqs = append(batch.Seqs, backend.SeqSlice{Start: len(batch.Positions), Len: n, Slot: s})
				for i := range n {
					batch.Positions = append(batch.Positions, int32(i))
				}
				ntiles += (n + 127) / 128
			}
			T, C, hv, S := len(batch.Positions), p.Channels(), p.VHeads, len(c.lens)
			b.step = stepInfo{tokens: T, seqs: S, ntiles: ntiles, tiles: 0x200, pos: 0x104, tok2seq: 0x108, sinfo: 0x300,
				hostSeqs: batch.Seqs, hostPos: batch.Positions}
			ds := &deltaState{p: p, ptr: 1 << 40, pos: make([]int32, S), used: make([]bool, S)}
			kv := &kvStore{spec: backend.KVSpec{Slots: S, Layers: []backend.KVLayer{{DeltaNet: p}}}, k: []uintptr{0}, v: []uintptr{0},
				delta: []*deltaState{ds}}
			ten := func(cols int) *Tensor { return &Tensor{ptr: 1 << 30, rows: T, cols: cols} }
			vec := &weight{shape: []int{hv}, experts: 1, out: 1, in: hv, dtype: tensor.F32, w: 0x5000}
			w := backend.DeltaNetWeights{Conv: &weight{shape: []int{C, 1, p.ConvKernel}, experts: C, out: 1, in: p.ConvKernel,
				dtype: tensor.BF16, w: 0x4000}, ALog: vec, DtBias: vec}
			b.GatedDeltaNet(ten(hv*p.VDim), ten(C), ten(hv), ten(hv), w, kv, 0, p)
			names := launchNames(b)
			if got := strings.Join(names, " "); got != c.want {
				t.Fatalf("launches %q, want %q", got, c.want)
			}
			prep, scan := deltaChunkSmem(p.KDim)
			for i, name := range names {
				l, want := &b.rec.ls[i], sigs[name]
				if int(l.n) != len(want) {
					t.Fatalf("%s with %d arguments, its kernel declares %d", name, l.n, len(want))
				}
				for a, k := range want {
					if l.kind(a) != k {
						t.Errorf("%s argument %d passed as kind %d, declared %d", name, a, l.kind(a), k)
					}
				}
				grid := fmt.Sprintf("%dx%dx%d smem %d", l.gx, l.gy, l.gz, l.smem)
				var g, cmin string
				switch name {
				case "deltanet_chunk_prep":
					g, cmin = fmt.Sprintf("%dx%dx1 smem %d", 2*ntiles, hv, prep), fmt.Sprint(int32(l.args[13]))
				case "deltanet_chunk_scan":
					g, cmin = fmt.Sprintf("4x%dx%d smem %d", hv, S, scan), fmt.Sprint(int32(l.args[12]))
				case "deltanet_scan_128":
					g, cmin = fmt.Sprintf("4x%dx%d smem 0", hv, S), fmt.Sprint(int32(l.args[12]))
				default:
					continue
				}
				if grid != g || cmin != fmt.Sprint(c.cmin) {
					t.Errorf("%s: grid %s, cmin %s; want %s, %d", name, grid, cmin, g, c.cmin)
				}
			}
			if l := len(b.rec.ls); l > 0 && c.want == chunked && int(b.rec.ls[l-1].block) != deltaThreads {
				t.Errorf("chunked scan of %d threads", b.rec.ls[l-1].block)
			}
		})
	}
}

// TestDeltaChunkSmem: the chunked kernels' shared memory at the key dims
// they serve fits the H200's 227 KiB opt-in (232448 bytes), and the flash
// query tiles the prep's grid is cut from hold whole chunks.
func TestDeltaChunkSmem(t *testing.T) {
	if plan.FlashTile%deltaChunk != 0 {
		t.Errorf("flash query tiles of %d rows do not hold whole chunks of %d", plan.FlashTile, deltaChunk)
	}
	for _, c := range []struct{ kd, prep, scan int }{
		{128, 4 * (2*64*132 + 2*64*68 + 128), 4 * (2*64*132 + 128*32 + 3*64*32 + 2*64*68 + 192)},
		{256, 4 * (2*64*260 + 2*64*68 + 128), 4 * (2*64*260 + 256*32 + 3*64*32 + 2*64*68 + 192)},
		{24, 4 * (2*64*68 + 2*64*68 + 128), 4 * (2*64*68 + 64*32 + 3*64*32 + 2*64*68 + 192)},
	} {
		prep, scan := deltaChunkSmem(c.kd)
		if prep != c.prep || scan != c.scan || scan > 232448 {
			t.Errorf("key dim %d: shared memory %d and %d bytes, want %d and %d (at most 232448)", c.kd, prep, scan, c.prep, c.scan)
		}
	}
}
