package plan

import "testing"

// The H200's 132 SMs and the shapes the figures in docs/cuda.md were
// measured on: Llama-3.1-8B (32 query heads over 8, head dim 128) and
// Qwen3-30B-A3B (32 over 4).
func TestDecodeAttention(t *testing.T) {
	def := DefaultTuning()
	noCluster := def
	noCluster.DecClusterMax = 0
	whole := def
	whole.DecHeads = 0
	for _, c := range []struct {
		name string
		s    DecodeShape
		t    Tuning
		want Decode
	}{
		// Short context, one token: one-head blocks, 17 splits cut to a cluster of 16.
		{"llama 264 keys", DecodeShape{1, 32, 8, 128, 264, true}, def,
			Decode{"attn_decode_128_h1c", 1, 16, 16, 32, 32, 40, false}},
		{"qwen3 264 keys", DecodeShape{1, 32, 4, 128, 264, true}, def,
			Decode{"attn_decode_128_h1c", 1, 16, 16, 32, 32, 36, false}},
		// The ticket merge keeps all 17 splits.
		{"llama 264 keys, no clusters", DecodeShape{1, 32, 8, 128, 264, true}, noCluster,
			Decode{"attn_decode_128_h1", 1, 17, 0, 32, 32, 40, false}},
		// q/k written back: no cluster.
		{"llama 264 keys, write-back", DecodeShape{1, 32, 8, 128, 264, false}, def,
			Decode{"attn_decode_128_h1", 1, 17, 0, 32, 32, 40, true}},
		// Whole groups at short contexts: Llama's 4 heads on _h4, 512/16 splits: too many for a cluster.
		{"llama whole groups", DecodeShape{1, 32, 8, 128, 264, true}, whole,
			Decode{"attn_decode_128_h4", 4, 32, 0, 8, 8, 16, false}},
		// Past 1024 keys Llama's groups of 4 stay whole; Qwen3's 8 run 2 a block up to 4096, 4 beyond.
		{"llama 8192 keys", DecodeShape{1, 32, 8, 128, 8200, true}, def,
			Decode{"attn_decode_128_h4", 4, 64, 0, 8, 8, 16, false}},
		{"qwen3 2048 keys", DecodeShape{1, 32, 4, 128, 2048, true}, def,
			Decode{"attn_decode_128_h2", 2, 33, 0, 16, 16, 20, false}},
		{"qwen3 32768 keys", DecodeShape{1, 32, 4, 128, 32768, true}, def,
			Decode{"attn_decode_128_h4", 4, 64, 0, 8, 8, 12, false}},
		// Batched steps keep the whole group (Llama: _h4), splits from the waves.
		{"llama 16 sequences", DecodeShape{16, 32, 8, 128, 640, true}, def,
			Decode{"attn_decode_128_h4c", 4, 5, 5, 128, 8, 256, false}},
		// Groups of 8 at short contexts take the general kernel with whole groups.
		{"qwen3 whole groups", DecodeShape{1, 32, 4, 128, 264, true}, whole,
			Decode{"attn_decode_128", 8, 32, 0, 4, 4, 8, false}},
		// Head dim 64, 64 keys (the shortest rounding): 4 splits in a cluster.
		{"64 keys", DecodeShape{1, 8, 8, 64, 16, true}, def,
			Decode{"attn_decode_64_h1c", 1, 4, 4, 8, 8, 16, false}},
		// Head dim 512 (Gemma 4's full layers, 16 heads over 2): at most 2 heads a block.
		{"gemma-4 512 at 32768 keys", DecodeShape{1, 16, 2, 512, 32768, true}, def,
			Decode{"attn_decode_512_h2", 2, 64, 0, 8, 8, 10, false}},
		{"gemma-4 512 at 512 keys", DecodeShape{1, 16, 2, 512, 500, true}, def,
			Decode{"attn_decode_512_h1", 1, 32, 0, 16, 16, 18, false}},
		{"gemma-4 512, 16 sequences", DecodeShape{16, 16, 2, 512, 4096, true}, def,
			Decode{"attn_decode_512_h2c", 2, 5, 5, 128, 8, 160, false}},
		// Head dim 256 where attn_dtile does not apply: groups of 6 (4 does not divide them), written back;
		// groups of 16, at most 4 a block.
		{"qwen3.5-27b 256, write-back", DecodeShape{1, 24, 4, 256, 8192, false}, def,
			Decode{"attn_decode_256_h2", 2, 44, 0, 12, 12, 16, true}},
		{"256 groups of 16", DecodeShape{8, 32, 2, 256, 1000, true}, def,
			Decode{"attn_decode_256_h4c", 4, 9, 9, 64, 8, 80, false}},
		{"256 groups of 3", DecodeShape{4, 6, 2, 256, 100, true}, def,
			Decode{"attn_decode_256_h1c", 1, 8, 8, 24, 6, 32, false}},
		// One split and whole groups: no counters.
		{"one split", DecodeShape{1, 8, 8, 64, 16, true}, Tuning{DecSplitKeys: 64, DecHeads: 0, DecLongHeads: -1},
			Decode{"attn_decode_64_h1", 1, 1, 0, 8, 8, 0, false}},
	} {
		got := DecodeAttention(c.s, c.t, 132)
		if got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestDecodeApplies(t *testing.T) {
	for _, c := range []struct {
		heads, kvh, hd int
		want           bool
	}{{32, 8, 128, true}, {32, 4, 128, true}, {28, 4, 128, true}, {32, 2, 128, false}, {8, 8, 64, true}, {16, 8, 256, true}, {32, 2, 256, true}, {16, 2, 512, true},
		{8, 2, 96, false}, {32, 0, 128, false}, {6, 4, 256, false}} {
		if got := DecodeApplies(c.heads, c.kvh, c.hd); got != c.want {
			t.Errorf("DecodeApplies(%d, %d, %d) = %v", c.heads, c.kvh, c.hd, got)
		}
	}
}

func TestFlashAttention(t *testing.T) {
	for _, c := range []struct {
		hd, tiles int
		want      Flash
	}{
		{128, 16, Flash{"flash2_attn_128", 16, 128, 104448}},
		{64, 3, Flash{"flash2_attn_64", 3, 128, 55296}},
		{256, 16, Flash{"flash2_attn_256", 16, 256, 202752}},
		{512, 16, Flash{"flash2_attn_512", 32, 256, 216064}}, // two blocks of 64 rows a tile
	} {
		if got := FlashAttention(c.hd, c.tiles); got != c.want {
			t.Errorf("hd %d: got %+v, want %+v", c.hd, got, c.want)
		}
		// Every shape serves whole tiles and fits an H100/H200 block's 227 KB.
		threads, rows, keys, _ := Flash2Geom(c.hd)
		if FlashTile%rows != 0 || threads%32 != 0 || keys%16 != 0 || Flash2Smem(c.hd) > 232448 {
			t.Errorf("hd %d: shape %d threads, %d rows, %d keys, %d bytes", c.hd, threads, rows, keys, Flash2Smem(c.hd))
		}
	}
}

func TestGenericSplits(t *testing.T) {
	for _, c := range []struct{ tokens, heads, want int }{{1, 32, 9}, {1, 8, 32}, {64, 32, 1}, {4, 32, 3}} {
		if got := GenericSplits(c.tokens, c.heads, 132); got != c.want {
			t.Errorf("GenericSplits(%d, %d) = %d, want %d", c.tokens, c.heads, got, c.want)
		}
	}
}

// KV-shared layers' decode steps (head dims 256/512): the _s kernels,
// merged by the ticket, never a cluster.
func TestDecodeShared(t *testing.T) {
	def := DefaultTuning()
	for _, c := range []struct {
		name string
		s    DecodeShape
		want Decode
	}{
		{"gemma-4-e 512, one sequence", DecodeShape{1, 8, 2, 512, 300, true},
			Decode{"attn_decode_512_h1s", 1, 32, 0, 8, 8, 10, false}},
		{"256, 4 sequences, groups of 8 as 4", DecodeShape{4, 16, 2, 256, 2000, true},
			Decode{"attn_decode_256_h4s", 4, 33, 0, 16, 4, 24, false}},
		{"256, q written back", DecodeShape{1, 8, 2, 256, 100, false},
			Decode{"attn_decode_256_h1s", 1, 8, 0, 8, 8, 10, true}},
	} {
		if got := DecodeShared(c.s, def, 132); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		heads, kvh, hd int
		want           bool
	}{{8, 2, 128, false}, {8, 2, 64, false}, {8, 2, 256, true}, {16, 2, 512, true}, {6, 4, 512, false}} {
		if got := SharedDecodeApplies(c.heads, c.kvh, c.hd); got != c.want {
			t.Errorf("SharedDecodeApplies(%d, %d, %d) = %v", c.heads, c.kvh, c.hd, got)
		}
	}
}
