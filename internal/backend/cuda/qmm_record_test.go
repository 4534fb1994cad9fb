//go:build linux

package cuda

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
)

// TestQMMJoinsProducts records, without a device, a 64-row step's norm
// and its q, k and v products, then the gate and up products on the next
// norm: each group must become one qmm4 launch with a segment per matrix,
// reading the bf16 copy of x the norm wrote, split again for its grid.
func TestQMMJoinsProducts(t *testing.T) {
	b := hostOnlyBackend()
	b.scratchX = devBuf{ptr: 1 << 38, size: 64 << 20}
	const T = 64
	b.step.tokens, b.step.seqs, b.step.logitRows = T, T, T
	s := newLlamaStep(1)
	rows := func(x *Tensor) *Tensor { c := *x; c.rows = T; return &c }
	x, xn, q, k, v := rows(s.h), rows(s.x), rows(s.q), rows(s.k), rows(s.v)
	g, u := rows(s.g), rows(s.u)
	L := s.layers[0]
	b.RMSNorm(xn, x, s.norm, 1e-5)
	b.Linear(q, xn, L.q, nil)
	b.Linear(k, xn, L.k, nil)
	b.Linear(v, xn, L.v, nil)
	b.RMSNorm(xn, x, s.norm, 1e-5)
	b.Linear(g, xn, L.g, nil)
	b.Linear(u, xn, L.u, nil)
	ls := b.rec.ls
	names := launchNames(b)
	want := []string{"rmsnorm", "qmm4_bf_64_m2d1", "rmsnorm", "qmm4_bf_64"} // narrow q/k/v, wide gate/up
	if len(names) != len(want) {
		t.Fatalf("recorded %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("recorded %v, want %v", names, want)
		}
	}
	for i, c := range []struct {
		at           int
		outs         []*Tensor
		gy, nb1, nb2 int
		perSM        int
	}{{1, []*Tensor{q, k, v}, 32 + 8 + 8, 32, 40, 3}, {3, []*Tensor{g, u}, 112 + 112, 112, 224, 2}} {
		l := &ls[c.at]
		if uintptr(ls[c.at-1].args[5]) != b.scratchX.ptr {
			t.Errorf("group %d: the norm does not write x's bf16 copy", i)
		}
		if uintptr(l.args[qX]) != b.scratchX.ptr || int(l.gy) != c.gy || int(l.args[qNB1]) != c.nb1 || int(l.args[qNB2]) != c.nb2 {
			t.Errorf("group %d: x %#x, grid y %d, nb %d %d; want grid y %d, nb %d %d", i, l.args[qX], l.gy, l.args[qNB1], l.args[qNB2], c.gy, c.nb1, c.nb2)
		}
		for si, o := range c.outs {
			if uintptr(l.args[qSeg0+si*qSegLen]) != o.ptr {
				t.Errorf("group %d: segment %d writes %#x, want %#x", i, si, l.args[qSeg0+si*qSegLen], o.ptr)
			}
		}
		if split := plan.QMMSplit(int(l.gy), 4096, b.SMs, c.perSM); int(l.gz) != split || (split > 1) != (l.cz == uint32(split)) {
			t.Errorf("group %d: split %d (cluster %d), want %d", i, l.gz, l.cz, split)
		}
	}
}

// TestQMMTiledCandidates: under a tiled variant the q, k and v products
// join into one launch of its kernel whose segments read each weight's
// tiled copy, not its rows (the copies preset here: making one needs a
// device, which TestConformanceVariants/qmm_w128t, _widet, _m2d1t have).
func TestQMMTiledCandidates(t *testing.T) {
	for _, c := range []struct{ variant, kernel string }{{"w128t", "qmm4_w128_t"}, {"widet", "qmm4_bf_64_t"}, {"m2d1t", "qmm4_bf_64_m2d1_t"}} {
		b := hostOnlyBackend()
		b.scratchX = devBuf{ptr: 1 << 38, size: 64 << 20}
		b.Tuning.QMMMinRows, b.Tuning.QMMMaxRows, b.Tuning.QMMWarpgroup, b.Tuning.QMMVariant = 9, 1<<20, true, c.variant
		const T = 128
		b.tmaps.at = map[tensorMapKey]uintptr{{b.scratchX.ptr, T, 4096, 128}: 1 << 39} // x's map, as if encoded
		b.step.tokens, b.step.seqs, b.step.logitRows = T, T, T
		s := newLlamaStep(1)
		rows := func(x *Tensor) *Tensor { c := *x; c.rows = T; return &c }
		x, xn, q, k, v := rows(s.h), rows(s.x), rows(s.q), rows(s.k), rows(s.v)
		L := s.layers[0]
		for i, w := range []*weight{L.q, L.k, L.v} {
			w.tw, w.tsb = uintptr(1<<40+i<<32), uintptr(1<<40+i<<32+1<<30)
		}
		b.RMSNorm(xn, x, s.norm, 1e-5)
		b.Linear(q, xn, L.q, nil)
		b.Linear(k, xn, L.k, nil)
		b.Linear(v, xn, L.v, nil)
		if b.err != nil {
			t.Fatal(b.err)
		}
		names := launchNames(b)
		if len(names) != 2 || names[1] != c.kernel {
			t.Fatalf("%s: recorded %v, want rmsnorm and one %s", c.variant, names, c.kernel)
		}
		l := b.rec.ls[1]
		for si, w := range []*weight{L.q, L.k, L.v} {
			o := qSeg0 + si*qSegLen
			if uintptr(l.args[o+1]) != w.tw || uintptr(l.args[o+2]) != w.tsb {
				t.Errorf("%s: segment %d reads %#x / %#x, want the tiled copy %#x / %#x", c.variant, si, l.args[o+1], l.args[o+2], w.tw, w.tsb)
			}
		}
	}
}

// TestQMMATiledCandidate: with Tuning.Tiled an 8-row product records
// qmma4_bf_1_xc_t reading the weight's tiled copy (preset here).
func TestQMMATiledCandidate(t *testing.T) {
	b := hostOnlyBackend()
	b.Tuning.Tiled = true
	const T = 8
	b.step.tokens, b.step.seqs, b.step.logitRows = T, T, T
	s := newLlamaStep(1)
	rows := func(x *Tensor) *Tensor { c := *x; c.rows = T; return &c }
	xn, o := rows(s.x), rows(s.q)
	w := s.layers[0].q
	w.tw, w.tsb = 1<<40, 1<<41
	b.Linear(o, xn, w, nil)
	if b.err != nil {
		t.Fatal(b.err)
	}
	names := launchNames(b)
	if len(names) != 1 || names[0] != "qmma4_bf_1_xc_t" {
		t.Fatalf("recorded %v, want qmma4_bf_1_xc_t", names)
	}
	if l := b.rec.ls[0]; uintptr(l.args[2]) != w.tw || uintptr(l.args[3]) != w.tsb {
		t.Errorf("reads %#x / %#x, want the tiled copy %#x / %#x", l.args[2], l.args[3], w.tw, w.tsb)
	}
}

// TestTiledRowCandidate: with Tuning.Tiled a one-row product
// records qgemv4t_bf on the tiled copy, split over K with a partial
// buffer and tickets when the tiles alone do not fill the device.
func TestTiledRowCandidate(t *testing.T) {
	b := hostOnlyBackend()
	b.Tuning.Tiled = true
	s := newLlamaStep(1)
	w := s.layers[0].q // 4096 x 4096: 32 tiles, so 8 splits
	w.tw, w.tsb = 1<<40, 1<<41
	b.Linear(s.q, s.x, w, nil)
	if b.err != nil {
		t.Fatal(b.err)
	}
	names := launchNames(b)
	if len(names) != 1 || names[0] != "qgemv4t_bf" {
		t.Fatalf("recorded %v, want qgemv4t_bf", names)
	}
	l := b.rec.ls[0]
	if uintptr(l.args[2]) != w.tw || uintptr(l.args[3]) != w.tsb || l.gx != 32 || l.gz != 8 || l.args[7] == 0 || l.args[8] == 0 {
		t.Errorf("launch grid %dx%dx%d, args %v: want the tiled copy, 32 tiles by 8 splits, a partial buffer and counters", l.gx, l.gy, l.gz, l.args[:l.n])
	}
}
