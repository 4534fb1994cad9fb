//go:build linux

package cuda

import (
	"strings"
	"testing"
)

// TestRecordQwen3Variants checks, without a GPU, what a Qwen3-30B-A3B
// decode step records by default and with the attention cluster variants
// (the kernels themselves are checked on the device by
// TestConformanceVariants): the launch count and the kernels and launch
// shapes that make the variant.
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
		{"no clusters", func(b *Backend) { b.DecClusterMax = 0 }, func(t *testing.T, _ *qwen3Step, ls []launch, names []string) {
			for i, n := range names {
				if strings.HasPrefix(n, "attn_decode") && (n != "attn_decode_128_h1" || ls[i].cz != 0) {
					t.Errorf("launch %d: %s with cluster depth %d, want attn_decode_128_h1 without", i, n, ls[i].cz)
				}
			}
		}, 8*layers + 2},
		{"no clusters for 8 at most", func(b *Backend) { b.DecClusterMax = 8 }, func(t *testing.T, _ *qwen3Step, ls []launch, names []string) {
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
			names := launchNames(b)
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

// TestRecordLongContextHeads checks, without a GPU, which decode attention
// kernel one-token steps take past 1024 keys: Llama's groups of 4 stay
// whole (_h4), Qwen3's groups of 8 run 2 heads a block up to 4096 keys and
// 4 beyond (longHeads).
func TestRecordLongContextHeads(t *testing.T) {
	for _, c := range []struct {
		model  string
		maxCtx int
		want   string
	}{
		{"llama", 2000, "attn_decode_128_h4"}, {"llama", 9000, "attn_decode_128_h4"},
		{"qwen3", 2000, "attn_decode_128_h2"}, {"qwen3", 4000, "attn_decode_128_h2"},
		{"qwen3", 5000, "attn_decode_128_h4"}, {"qwen3", 33000, "attn_decode_128_h4"},
	} {
		b := hostOnlyBackend()
		b.step.maxCtx = c.maxCtx
		recordModelStep(b, c.model, 2)
		n := 0
		for _, name := range launchNames(b) {
			if strings.HasPrefix(name, "attn_decode") {
				n++
				if name != c.want {
					t.Errorf("%s at %d keys: %s, want %s", c.model, c.maxCtx, name, c.want)
				}
			}
		}
		if n != 2 {
			t.Errorf("%s at %d keys: %d attention launches, want 2", c.model, c.maxCtx, n)
		}
	}
}

// recordModelStep records a decode step of layers layers of Llama-3.1-8B
// ("llama") or Qwen3-30B-A3B ("qwen3") on the host-only backend b.
func recordModelStep(b *Backend, model string, layers int) {
	switch model {
	case "llama":
		st := newLlamaStep(layers)
		knowRoPETable(b, st.rope)
		st.record(b)
	case "qwen3":
		st := newQwen3Step(layers)
		knowRoPETable(b, st.rope)
		st.record(b)
	default:
		panic("recordModelStep: unknown model " + model)
	}
}

// launchNames gives the kernel name of each launch b has recorded.
func launchNames(b *Backend) []string {
	byFn := map[uintptr]string{}
	for n, f := range b.fns {
		byFn[f] = n
	}
	names := make([]string, len(b.rec.ls))
	for i, l := range b.rec.ls {
		names[i] = byFn[l.fn]
	}
	return names
}
