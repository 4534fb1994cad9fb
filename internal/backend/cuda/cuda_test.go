//go:build linux

package cuda

import (
	"errors"
	"math"
	"os"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/backendtest"
	_ "github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// newOrSkip starts the backend, or skips where there is no GPU (CI).
func newOrSkip(t testing.TB) *Backend {
	t.Helper()
	b, err := New(0)
	var un *Unavailable
	if errors.As(err, &un) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err) // the device is there but the backend failed: a bug
	}
	t.Logf("%s (compile %v, cache hit %v)", b.Info(), b.CompileTime, b.CacheHit)
	return b
}

func TestLibraryDiscovery(t *testing.T) {
	// Pure Go: runs everywhere. An override that names a folder is searched.
	dir := t.TempDir()
	p := dir + "/libnvrtc.so.13"
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MLXCEL_NVRTC_LIB", dir)
	c := candidates(specNVRTC)
	if len(c) == 0 || c[0] != p {
		t.Fatalf("override folder not searched first: %v", c)
	}
	if !versionLess("/x/libnvrtc.so.12", "/x/libnvrtc.so.13.0") || versionLess("/x/libnvrtc.so.13", "/x/libnvrtc.so.12") {
		t.Fatal("versionLess")
	}
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

// TestConformanceVariants runs the suite on the one-row kernels that are
// off by default (kept for measuring, so they must stay correct): the
// streaming kernel at each stage count with every 4-bit product of K >=
// 4096 on it (MLXCEL_CUDA_STREAM_MIN=0) on a grid of 5 blocks, so each
// block walks many row groups through its pipeline; the tensor-core
// kernel with 8 and 4 warps a block (MLXCEL_CUDA_GEMVT); and the f16x2
// kernel with 8 and 16 rows a block (MLXCEL_CUDA_GEMVH); and the 2-16 row
// tensor-core kernel's earlier default (MLXCEL_CUDA_MMAV=xp); the norm
// folds (MLXCEL_CUDA_NORMFUSE=1), which DecodeLayer checks op by op; and
// decode attention with its next K/V round prefetched (MLXCEL_CUDA_DECPF),
// one-head decode attention blocks on the AD_G kernel (MLXCEL_CUDA_DECH1=0),
// and blocks of 2 or 4 heads on it too (MLXCEL_CUDA_DECHG=0);
// MoE decode routed by one warp (MLXCEL_CUDA_ROUTE=warp) and its gate/up
// kernel on plain 32- or 64-lane row groups (MLXCEL_CUDA_MOEGU),
// the down kernel's weights loaded after its wait (MLXCEL_CUDA_MOEPRE=0),
// and the down projection and the slot sum in two passes (MLXCEL_CUDA_MOEDOWN=sum);
// decode attention's splits merged by the last block's ticket instead of
// a thread block cluster (MLXCEL_CUDA_DECCLUSTER=0; DecodeLayer's ScratchQK
// steps take the cluster by default); and Qwen3-like groups of 8 served
// four heads a block past 1024 keys at any context (MLXCEL_CUDA_DECLONGHEADS=4;
// AttentionLong's 1100 keys take two by default).
func TestConformanceVariants(t *testing.T) {
	for _, v := range []struct{ name, env, val string }{
		{"stream4", "MLXCEL_CUDA_STREAM", "4"}, {"stream3", "MLXCEL_CUDA_STREAM", "3"},
		{"stream6", "MLXCEL_CUDA_STREAM", "6"}, {"tc", "MLXCEL_CUDA_GEMVT", "1"}, {"tcw4", "MLXCEL_CUDA_GEMVT", "w4"},
		{"half", "MLXCEL_CUDA_GEMVH", "1"}, {"half16", "MLXCEL_CUDA_GEMVH", "16"}, {"mmaxp", "MLXCEL_CUDA_MMAV", "xp"},
		{"folds", "MLXCEL_CUDA_NORMFUSE", "1"}, {"decpf", "MLXCEL_CUDA_DECPF", "1"}, {"h1off", "MLXCEL_CUDA_DECH1", "0"}, {"hgoff", "MLXCEL_CUDA_DECHG", "0"},
		{"routewarp", "MLXCEL_CUDA_ROUTE", "warp"}, {"moegu32", "MLXCEL_CUDA_MOEGU", "32"},
		{"moegu64", "MLXCEL_CUDA_MOEGU", "64"}, {"moepreoff", "MLXCEL_CUDA_MOEPRE", "0"}, {"moedownsum", "MLXCEL_CUDA_MOEDOWN", "sum"},
		{"decclusteroff", "MLXCEL_CUDA_DECCLUSTER", "0"}, {"longheads4", "MLXCEL_CUDA_DECLONGHEADS", "4"},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Setenv(v.env, v.val)
			t.Setenv("MLXCEL_CUDA_STREAM_MIN", "0")
			t.Setenv("MLXCEL_CUDA_STREAM_GRID", "5")
			b := newOrSkip(t)
			defer b.Close()
			if b.streamStages == 0 && !b.gemvTC && b.gemvHalf == "" && b.mmaVariant != "xp" && b.folds == defaultNormFolds && !b.decPF && b.decH1 && b.decHG &&
				b.routeBlock && b.moeGULanes == 0 && b.moeGUO6 && b.moePre && b.moeDownAcc && b.decClusterMax > 0 && b.decLongHeads < 0 {
				t.Fatalf("%s=%s left the kernel off on %s", v.env, v.val, b.Info())
			}
			backendtest.Run(t, b)
		})
	}
}
