//go:build linux

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// The store takes the dtypes its kernels read (f16 for auto, E4M3 codes
// for fp8) and refuses, naming the flag, the others; the backend says the
// same before any store exists (the server's preflight asks
// backend.CheckKVDtype before loading weights).
func TestKVDtypeRefused(t *testing.T) {
	if err := backend.CheckKVDtype(&Backend{}, backend.KVFP8); err != nil {
		t.Errorf("CheckKVDtype(fp8): %v", err)
	}
	if err := backend.CheckKVDtype(&Backend{}, backend.KVBF16); err == nil {
		t.Error("CheckKVDtype(bf16) = nil, but the store keeps no bf16")
	}
	for _, d := range []backend.KVDtype{"", backend.KVAuto, backend.KVFP8} {
		if err := checkKVDtype(d); err != nil {
			t.Errorf("%q: %v", d, err)
		}
	}
	for _, d := range []backend.KVDtype{backend.KVF32, backend.KVBF16} {
		err := checkKVDtype(d)
		if err == nil || !strings.Contains(err.Error(), "--kv-cache-dtype "+string(d)) {
			t.Errorf("%s: got %v, want a refusal naming --kv-cache-dtype", d, err)
		}
	}
}

// An fp8 store is half the bytes of the f16 one in its paged layers (one
// byte a value), and the recurrent state stays f32 at any dtype: what
// the server's --parallel 0 and --kv-mem sizing read (backend.KVSizer).
func TestKVStoreBytesFP8(t *testing.T) {
	b := &Backend{}
	spec := backend.KVSpec{NumBlocks: 10, BlockSize: 16, Slots: 2, Layers: []backend.KVLayer{{KVHeads: 8, HeadDim: 128},
		{KVHeads: 2, HeadDim: 64}, {KVHeads: 8, HeadDim: 128, Shared: true}}}
	f16 := b.KVStoreBytes(spec)
	spec.Dtype = backend.KVFP8
	if f8, want := b.KVStoreBytes(spec), int64(10*16*(8*128+2*64)*2); f8 != want || 2*f8 != f16 {
		t.Errorf("fp8 store %d bytes, want %d (f16: %d)", f8, want, f16)
	}
}

// TestLaunchSignaturesFP8 records attention over an fp8 store without a
// device, on every path (attn_decode, attn_dtile, flash2 for a prefill,
// the generic kernel with its kv_store for an odd head dim and for a
// decode step at head dim 96; attn_decode and attn_dtile at 256, attn_decode
// at 512): each launch takes its kernel's _f8 twin
// and passes that kernel's parameters; the same calls over an f16 store
// launch no _f8 kernel.
func TestLaunchSignaturesFP8(t *testing.T) {
	sigs := kernelSignatures(t)
	for _, f8 := range []bool{true, false} {
		for _, c := range []struct {
			name   string
			decode bool
			hd     int
			tile   bool
			want   string
		}{
			{"decode", true, 128, false, "attn_decode_128"},
			{"decode tile", true, 128, true, "attn_dtile_128"},
			{"decode tile 64", true, 64, true, "attn_dtile_64"},
			{"decode 256", true, 256, false, "attn_decode_256"},
			{"decode tile 256", true, 256, true, "attn_dtile_256"},
			{"decode 512", true, 512, false, "attn_decode_512"},
			{"decode 512 tile on", true, 512, true, "attn_decode_512"},
			{"decode 96", true, 96, false, "attention"},
			{"decode shared 256", true, 256, false, "attn_decode_256_h1s"},
			{"decode shared 512", true, 512, true, "attn_decode_512_h1s"},
			{"prefill", false, 128, false, "flash2_attn_128"},
			{"prefill 512", false, 512, false, "flash2_attn_512"},
			{"prefill 12", false, 12, false, "attention"},
		} {
			t.Run(fmt.Sprintf("f8=%v/%s", f8, c.name), func(t *testing.T) {
				b := hostOnlyBackend()
				all := map[int]bool{64: true, 128: true, 256: true, 512: true}
				b.flash2 = map[string]map[int]bool{"": all, "_f8": all}
				if c.tile {
					decodeTileAt1(b)
				}
				T := 1
				if !c.decode {
					T = 40
					b.step.tokens, b.step.decode, b.step.maxLen, b.step.ntiles, b.step.tiles = T, false, T, 1, 0x120
				}
				heads, kvh := 8, 2
				kv := &kvStore{spec: backend.KVSpec{NumBlocks: 64, BlockSize: 16, Layers: []backend.KVLayer{{KVHeads: kvh, HeadDim: c.hd}}},
					k: []uintptr{1 << 30}, v: []uintptr{1<<30 + 1<<24}, f8: f8}
				if f8 {
					kv.spec.Dtype = backend.KVFP8
				}
				addr := uintptr(1 << 24)
				act := func(cols int) *Tensor {
					addr += uintptr(4*T*cols+255) &^ 255
					return &Tensor{ptr: addr, rows: T, cols: cols}
				}
				q, k, v, o := act(heads*c.hd), act(kvh*c.hd), act(kvh*c.hd), act(heads*c.hd)
				var kk, vv backend.Tensor = k, v
				if strings.Contains(c.name, "shared") { // a KV-shared layer's call: nil k and v
					kk, vv = nil, nil
				}
				b.Attention(o, q, kk, vv, kv, 0, backend.AttnParams{Heads: heads, KVHeads: kvh, HeadDim: c.hd, Scale: 0.1, ScratchQK: true})
				if checkLaunches(t, b, sigs) == 0 {
					t.Fatal("no launch checked")
				}
				names := launchNames(b)
				found := false
				for _, n := range names {
					found = found || strings.HasPrefix(n, c.want)
					if strings.HasSuffix(n, "_f8") != f8 {
						t.Errorf("launch %s over a store with f8=%v", n, f8)
					}
				}
				if !found {
					t.Errorf("no %s launch among %v", c.want, names)
				}
			})
		}
	}
}
