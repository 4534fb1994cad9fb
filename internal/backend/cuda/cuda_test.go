//go:build linux

package cuda

import (
	"errors"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/cudalib"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/backendtest"
	_ "github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/backend/cuda/plan"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// newOrSkip starts the backend, or skips where there is no GPU (CI).
func newOrSkip(t testing.TB) *Backend {
	t.Helper()
	b, err := New(0)
	var un *cudalib.Unavailable
	if errors.As(err, &un) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err) // the device is there but the backend failed: a bug
	}
	t.Logf("%s (compile %v, cache hit %v; programs compiled %v)", b.Info(), b.CompileTime, b.CacheHit, b.ProgramTimes)
	return b
}

func TestSmoke(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	x := b.NewTensor(3, 1000)
	b.mu.Lock()
	b.fill(b.tt(x).ptr, 2.5, 3000)
	b.mu.Unlock()
	b.Scale(x, 2)
	out := make([]float32, 3000)
	b.ReadRows(x, out)
	for i, v := range out {
		if v != 5 {
			t.Fatalf("element %d = %v, want 5", i, v)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	backendtest.Run(t, b)
}

// TestGraphReplay runs the same small step shape several times: the first
// run launches directly, the second captures, later ones replay; every
// result must equal the direct run's.
func TestGraphReplay(t *testing.T) {
	b := newOrSkip(t)
	defer b.Close()
	const rows, cols = 2, 512
	tab := make([]float32, 4*cols)
	for i := range tab {
		tab[i] = float32(math.Sin(float64(i)))
	}
	raw := make([]byte, 4*len(tab))
	for i, v := range tab {
		u := math.Float32bits(v)
		raw[4*i], raw[4*i+1], raw[4*i+2], raw[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	w, err := b.UploadWeight(&tensor.Host{Name: "t", Shape: []int{4, cols}, DType: tensor.F32, Data: raw})
	if err != nil {
		t.Fatal(err)
	}
	var first []float32
	x := b.NewTensor(rows, cols) // kept across steps, as model code does
	for it := 0; it < 5; it++ {
		if err := b.BeginStep(&backend.Batch{Tokens: []int32{int32(it % 2), 3}, Positions: []int32{0, 1},
			Seqs: []backend.SeqSlice{{Start: 0, Len: 2}}}); err != nil {
			t.Fatal(err)
		}
		b.Embed(x, w)
		for k := 0; k < 10; k++ {
			b.Scale(x, 1.01)
			b.Softcap(x, 3)
		}
		out := make([]float32, rows*cols)
		b.ReadRows(x, out)
		if it == 0 {
			first = out
		}
		if it%2 == 0 {
			for i := range out {
				if out[i] != first[i] {
					t.Fatalf("step %d element %d: %v, direct run %v", it, i, out[i], first[i])
				}
			}
		}
	}
	c, r, _, f, lastErr := b.GraphStats()
	t.Logf("graphs: %d captured, %d replays, %d failed (%v)", c, r, f, lastErr)
	if c < 1 || r < 1 || f > 0 {
		t.Fatalf("graph path not taken: %d captures, %d replays, %d failures (%v)", c, r, f, lastErr)
	}
}

// TestConformanceVariants runs the suite with decode attention's measured
// sizes set to the other values the code takes on other devices or shapes,
// so each path stays correct whatever a machine picks: splits merged by
// the last block's ticket instead of a thread block cluster (devices
// before Hopper); a kv head's whole group of query heads in one block at
// short contexts (DecHeads 0) and four heads a block past 1024 keys at any
// context (DecLongHeads 4; AttentionLong's 1100 keys take two by default);
// shorter and longer splits; each form of the qmm4 kernel for every
// product; attn_decode for the decode steps attn_dtile takes by default;
// the generic kernel for head dims 256 and 512; Gated DeltaNet all
// recurrent or all chunked; MoE steps of 8 tokens on the grouped GEMM.
func TestConformanceVariants(t *testing.T) {
	for _, v := range []struct {
		name string
		set  func(*plan.Tuning)
	}{
		{"ticketmerge", func(u *plan.Tuning) { u.DecClusterMax = 0 }},
		{"wholegroups", func(u *plan.Tuning) { u.DecHeads = 0 }},
		{"longheads4", func(u *plan.Tuning) { u.DecLongHeads = 4 }},
		{"splitkeys8", func(u *plan.Tuning) { u.DecSplitKeys = 8 }},
		{"splitkeys64", func(u *plan.Tuning) { u.DecSplitKeys = 64 }},
		{"noqmm", func(u *plan.Tuning) { u.QMMMinRows = 0 }},
		{"qmm_wide", func(u *plan.Tuning) { u.QMMVariant = "wide" }},
		{"qmm_m2d1", func(u *plan.Tuning) { u.QMMVariant = "m2d1" }},
		{"qmm17", func(u *plan.Tuning) { u.QMMMinRows = 17 }}, // 17-32 rows on qmm4 (bf16 x)
		// The warpgroup form's 128-row tile for 33-64 rows too (sm_90a only).
		{"qmm_w128", func(u *plan.Tuning) { u.QMMVariant = "w128" }},
		// qmm4's forms chosen by the matrix, as on devices without wgmma.
		{"noqmmw", func(u *plan.Tuning) { u.QMMWarpgroup = false }},
		// attn_decode where the tile kernel takes decode steps by default.
		{"notile", func(u *plan.Tuning) { u.DecTileMinTokens = 0 }},
		{"notileticket", func(u *plan.Tuning) { u.DecTileMinTokens, u.DecClusterMax = 0, 0 }},
		// The generic kernel for head dims 256/512 decode steps (before attn_decode/attn_dtile took them).
		{"genericwide", func(u *plan.Tuning) { u.DecGenericWide = true }},
		// Gated DeltaNet's recurrent scan for every sequence, and the
		// chunked form for every one (decode tokens and 1-position chunks too).
		{"nochunk", func(u *plan.Tuning) { u.DeltaChunkMin = 0 }},
		{"chunk1", func(u *plan.Tuning) { u.DeltaChunkMin = 1 }},
		// MoE steps of 8 tokens and more on the grouped expert GEMM.
		{"moegrouped8", func(u *plan.Tuning) { u.MoEGEMMRows = 8 }},
	} {
		t.Run(v.name, func(t *testing.T) {
			b := newOrSkip(t)
			defer b.Close()
			if (strings.HasPrefix(v.name, "qmm_w128") || v.name == "noqmmw") && !b.QMMWarpgroup {
				t.Skipf("%s: no warpgroup MMA forms on %s", v.name, b.Info())
			}
			if c := strings.TrimPrefix(v.name, "qmm_"); c != "w128" && slices.ContainsFunc(plan.QMMWKernels(), func(k plan.QMMWKernel) bool { return k.Variant == c }) &&
				!slices.Contains(b.qmmwCandidates, c) {
				t.Skipf("%s: the device did not grant its shared memory (%s)", v.name, b.Info())
			}
			before := b.Tuning
			v.set(&b.Tuning)
			if b.Tuning == before {
				t.Fatalf("%s left the tuning at its default on %s", v.name, b.Info())
			}
			backendtest.Run(t, b)
		})
	}
}
