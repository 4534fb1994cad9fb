//go:build linux

package cuda

import (
	"strings"
	"testing"
)

// TestRecordQwen3Variants checks, without a GPU, what a Qwen3-30B-A3B
// decode step records by default and with each decode variant that has
// not yet run on a GPU (the kernels themselves are checked on the device
// by TestMoEDecode and TestConformanceVariants): the launch count and the
// kernels and arguments that make the variant.
func TestRecordQwen3Variants(t *testing.T) {
	const layers = 48
	for _, c := range []struct {
		name   string
		set    func(b *Backend)
		check  func(t *testing.T, st *qwen3Step, ls []launch, names []string)
		wantLs int
	}{
		{"default", func(*Backend) {}, func(t *testing.T, _ *qwen3Step, ls []launch, names []string) {
			// One-head blocks, their splits (at most 16) in one cluster.
			for i, n := range names {
				if strings.HasPrefix(n, "attn_decode") &&
					(n != "attn_decode_128_h1c" || ls[i].cz != ls[i].gz || ls[i].gz < 2 || ls[i].gz > 16) {
					t.Errorf("launch %d: %s, %d splits, cluster depth %d", i, n, ls[i].gz, ls[i].cz)
				}
			}
			want := map[string]int{"moe_router8_bf": layers, "moe_gateup4_bf_g64_o6": layers, "moe_down_acc4_bf": layers,
				"add_rmsnorm": 2 * layers}
			for n, w := range want {
				if got := count(names, n); got != w {
					t.Errorf("%d launches of %s, want %d", got, n, w)
				}
			}
		}, 8*layers + 2},
		{"router takes the add_rmsnorm", func(b *Backend) { b.moeAddNorm = true }, func(t *testing.T, st *qwen3Step, ls []launch, names []string) {
			for i, n := range names {
				if !strings.HasPrefix(n, "moe_router") {
					continue
				}
				if names[i-1] == "add_rmsnorm" || names[i-1] == "rmsnorm" {
					t.Errorf("launch %d: %s still follows %s", i, n, names[i-1])
				}
				// nsrc (12), nwt (13), nadd (16), nsum (17): the residual
				// stream h is both the first addend and the sum.
				a := ls[i].args
				if uintptr(a[12]) != st.h.ptr || uintptr(a[17]) != st.h.ptr || uintptr(a[16]) != st.o.ptr || a[13] == 0 {
					t.Errorf("launch %d: router norm arguments src %#x add %#x sum %#x w %#x, want h %#x, o %#x",
						i, a[12], a[16], a[17], a[13], st.h.ptr, st.o.ptr)
				}
			}
		}, 7*layers + 2},
		{"gate/up prefetches down", func(b *Backend) { b.moeDPF = true }, func(t *testing.T, _ *qwen3Step, _ []launch, names []string) {
			if got := count(names, "moe_gateup4_bf_g64_o6_pf"); got != layers {
				t.Errorf("%d launches of moe_gateup4_bf_g64_o6_pf, want %d", got, layers)
			}
		}, 8*layers + 2},
		{"no clusters", func(b *Backend) { b.decClusterMax = 0 }, func(t *testing.T, _ *qwen3Step, ls []launch, names []string) {
			for i, n := range names {
				if strings.HasPrefix(n, "attn_decode") && (n != "attn_decode_128_h1" || ls[i].cz != 0) {
					t.Errorf("launch %d: %s with cluster depth %d, want attn_decode_128_h1 without", i, n, ls[i].cz)
				}
			}
		}, 8*layers + 2},
		{"no clusters for 8 at most", func(b *Backend) { b.decClusterMax = 8 }, func(t *testing.T, _ *qwen3Step, ls []launch, names []string) {
			for i, n := range names {
				if strings.HasPrefix(n, "attn_decode") && (n != "attn_decode_128_h1" || ls[i].cz != 0 || ls[i].gz <= 8) {
					t.Errorf("launch %d: %s, %d splits, cluster depth %d: want the ticket path for more than 8 splits", i, n, ls[i].gz, ls[i].cz)
				}
			}
		}, 8*layers + 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, st := hostOnlyBackend(), newQwen3Step(layers)
			knowRoPETable(b, st.rope)
			c.set(b)
			st.record(b)
			names := make([]string, len(b.rec.ls))
			byFn := map[uintptr]string{}
			for n, f := range b.fns {
				byFn[f] = n
			}
			for i, l := range b.rec.ls {
				names[i] = byFn[l.fn]
			}
			if len(names) != c.wantLs {
				t.Errorf("%d launches, want %d", len(names), c.wantLs)
			}
			c.check(t, st, b.rec.ls, names)
		})
	}
}

func count(names []string, n string) int {
	k := 0
	for _, m := range names {
		if m == n {
			k++
		}
	}
	return k
}
