//go:build linux

package cuda

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// TestDecodeTileSinks records, without a device, a decode step of
// gpt-oss-20b's attention (64 heads of 64, 8 kv heads, sinks): by default
// on attn_dtile_64 with the sinks as its last argument, with the tile
// kernel off (DecTileMinTokens 0) on attn_decode; both launches pass their
// kernels' parameters.
func TestDecodeTileSinks(t *testing.T) {
	sigs := kernelSignatures(t)
	for _, onTile := range []bool{false, true} {
		b := hostOnlyBackend()
		decodeTileAt1(b)
		if !onTile {
			b.Tuning.DecTileMinTokens = 0
		}
		addr := uintptr(1 << 40)
		act := func(cols int) *Tensor { addr += 1 << 20; return &Tensor{ptr: addr, rows: 1, cols: cols} }
		sinks := &weight{shape: []int{64}, experts: 1, dtype: tensor.F32, w: 1 << 41, out: 1, in: 64}
		kv := &kvStore{spec: backend.KVSpec{NumBlocks: 64, BlockSize: 16, Layers: []backend.KVLayer{{KVHeads: 8, HeadDim: 64}}},
			k: []uintptr{1 << 30}, v: []uintptr{1<<30 + 1<<24}}
		q, k, v, o := act(64*64), act(8*64), act(8*64), act(64*64)
		b.Attention(o, q, k, v, kv, 0, backend.AttnParams{Heads: 64, KVHeads: 8, HeadDim: 64, Scale: 0.125, Window: 128,
			Sinks: sinks, ScratchQK: true})
		checkLaunches(t, b, sigs)
		names := launchNames(b)
		if len(names) != 1 {
			t.Fatalf("tile=%v: recorded %v, want one attention launch", onTile, names)
		}
		l := &b.rec.ls[0]
		switch {
		case onTile && names[0] != "attn_dtile_64":
			t.Errorf("tile: recorded %s, want attn_dtile_64", names[0])
		case onTile && uintptr(l.args[l.n-1]) != sinks.w:
			t.Errorf("attn_dtile_64's last argument %#x, want the sinks at %#x", l.args[l.n-1], sinks.w)
		case !onTile && !strings.HasPrefix(names[0], "attn_decode_64"):
			t.Errorf("no tile: recorded %s, want attn_decode_64", names[0])
		}
	}
}
