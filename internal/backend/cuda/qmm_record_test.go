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
	_, q, k, v, g, u := recordNormProducts(b, T)
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

// recordNormProducts records a T-row step's norm and its q, k and v
// products, then the next norm and its gate and up products (Llama-3.1-8B
// shapes), and returns the norm output and the five products' outputs.
func recordNormProducts(b *Backend, T int) (xn, q, k, v, g, u *Tensor) {
	b.step.tokens, b.step.seqs, b.step.logitRows = T, T, T
	s := newLlamaStep(1)
	rows := func(x *Tensor) *Tensor { c := *x; c.rows = T; return &c }
	x := rows(s.h)
	xn, q, k, v, g, u = rows(s.x), rows(s.q), rows(s.k), rows(s.v), rows(s.g), rows(s.u)
	L := s.layers[0]
	b.RMSNorm(xn, x, s.norm, 1e-5)
	b.Linear(q, xn, L.q, nil)
	b.Linear(k, xn, L.k, nil)
	b.Linear(v, xn, L.v, nil)
	b.RMSNorm(xn, x, s.norm, 1e-5)
	b.Linear(g, xn, L.g, nil)
	b.Linear(u, xn, L.u, nil)
	return
}
