package plan

import "testing"

// DecodeTile on the H200's 132 SMs with clusters of up to 16: splits fill
// the card about twice over (2 blocks an SM), at least 128 keys each, at
// most 64; a cluster merges up to 16, a ticket per (sequence, kv head)
// more.
func TestDecodeTile(t *testing.T) {
	def := DefaultTuning()
	for _, c := range []struct {
		name       string
		s          DecodeShape
		clusterMax int
		want       Decode
		ok         bool
	}{
		{"llama 64 seqs at 1k", DecodeShape{64, 32, 8, 128, 1024, true}, 16,
			Decode{Kernel: "attn_dtile_128", HeadsPerBlock: 4, Splits: 2, Cluster: 2, BlocksPerSplit: 512, GridX: 8}, true},
		{"llama 128 seqs", DecodeShape{128, 32, 8, 128, 1024, true}, 16,
			Decode{Kernel: "attn_dtile_128", HeadsPerBlock: 4, Splits: 1, BlocksPerSplit: 1024, GridX: 8}, true},
		{"qwen3 16 seqs", DecodeShape{16, 32, 4, 128, 700, true}, 16,
			Decode{Kernel: "attn_dtile_128", HeadsPerBlock: 8, Splits: 8, Cluster: 8, BlocksPerSplit: 64, GridX: 4}, true},
		{"qwen2.5 groups of 7, head dim 64 shape", DecodeShape{32, 28, 4, 64, 300, true}, 16,
			Decode{Kernel: "attn_dtile_64", HeadsPerBlock: 7, Splits: 4, Cluster: 4, BlocksPerSplit: 128, GridX: 4}, true},
		{"no clusters: a ticket", DecodeShape{64, 32, 8, 128, 1024, true}, 0,
			Decode{Kernel: "attn_dtile_128", HeadsPerBlock: 4, Splits: 2, Counters: 512, BlocksPerSplit: 512, GridX: 8}, true},
		{"q/k written back", DecodeShape{64, 32, 8, 128, 1024, false}, 16, Decode{}, false},
		{"groups of 16", DecodeShape{64, 32, 2, 128, 1024, true}, 16, Decode{}, false},
		// Head dim 256: one block an SM, so splits fill it once over; clusters of at most 8.
		{"head dim 256, 64 seqs", DecodeShape{64, 16, 8, 256, 1024, true}, 16,
			Decode{Kernel: "attn_dtile_256", HeadsPerBlock: 2, Splits: 1, BlocksPerSplit: 512, GridX: 8}, true},
		{"qwen3.5-35b one seq at 512", DecodeShape{1, 16, 2, 256, 512, true}, 16,
			Decode{Kernel: "attn_dtile_256", HeadsPerBlock: 8, Splits: 4, Cluster: 4, BlocksPerSplit: 2, GridX: 2}, true},
		{"qwen3.5-35b one seq at 32768", DecodeShape{1, 16, 2, 256, 32768, true}, 16,
			Decode{Kernel: "attn_dtile_256", HeadsPerBlock: 8, Splits: 64, Counters: 2, BlocksPerSplit: 2, GridX: 2}, true},
		{"qwen3.5-35b 16 seqs at 4096: 9 splits, past the cluster cap of 8", DecodeShape{16, 16, 2, 256, 4096, true}, 16,
			Decode{Kernel: "attn_dtile_256", HeadsPerBlock: 8, Splits: 9, Counters: 32, BlocksPerSplit: 32, GridX: 2}, true},
		{"gemma-4 sliding 16 seqs at 4096", DecodeShape{16, 16, 8, 256, 4096, true}, 16,
			Decode{Kernel: "attn_dtile_256", HeadsPerBlock: 2, Splits: 3, Cluster: 3, BlocksPerSplit: 128, GridX: 8}, true},
		{"head dim 512", DecodeShape{1, 16, 2, 512, 1024, true}, 16, Decode{}, false},
		{"head dim 256, groups of 16", DecodeShape{8, 32, 2, 256, 1024, true}, 16, Decode{}, false},
	} {
		got, ok := DecodeTile(c.s, def, 132, c.clusterMax)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: got %+v %v, want %+v %v", c.name, got, ok, c.want, c.ok)
		}
	}
	few := def
	few.DecTileMinTokens = 16
	if _, ok := DecodeTile(DecodeShape{8, 32, 8, 128, 1024, true}, few, 132, 16); ok {
		t.Error("8 sequences took the tile kernel with DecTileMinTokens 16")
	}
}
