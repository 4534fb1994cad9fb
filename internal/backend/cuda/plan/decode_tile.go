package plan

import "fmt"

// DecTileMinTokens is the fewest one-token sequences a decode step needs
// for attention to take attn_dtile (the tensor-core tile kernel) instead
// of attn_decode: every decode step. Measured on the H200 (s13r3,
// synthetic Llama-3.1-8B 4-bit, step ms attn_decode / attn_dtile): one
// sequence at 128 keys 2.22 / 2.21, 1024 2.97 / 2.29, 8192 4.00 / 3.36,
// 32768 7.31 / 4.16; 8 at 1024 7.21 / 5.88, 8 at 4096 12.89 / 6.88; 64 at
// 1024 17.0 / 10.5. attn_decode keeps the steps the tile kernel does not
// take (q and k written back, sinks, groups over 8).
const DecTileMinTokens = 1

// decTileKeys is the fewest keys a tile kernel split takes: one 16-key
// tile for each of its 4 warps, twice.
const decTileKeys = 128

// decTileBlocksPerSM is attn_dtile's residency at head dims 64 and 128
// (__launch_bounds__(128, 2) and ~83 KB of shared memory at 128); at 256
// its ~141 KB (DecodeTileSmem) leave one block an SM.
func decTileBlocksPerSM(hd int) int {
	if hd > 128 {
		return 1
	}
	return 2
}

// decTileClusterMax256 caps attn_dtile_256's clusters at the portable 8:
// with one block an SM, a cluster of 16 needs 16 free SMs of one GPC.
const decTileClusterMax256 = 8

// DecodeTileSmem is attn_dtile_<hd>'s dynamic shared memory (dtcfg in
// kernels/decode_tile.cu): Q's 16 padded rows, the step's k and v in f16,
// then 4 warps x 2 stages x (K and V tiles of 16 padded rows).
func DecodeTileSmem(hd int) int {
	ks := hd + 8
	return 16*ks*2 + 2*hd*2 + 4*2*2*16*ks*2
}

// DecodeTile plans a decode step's attention on attn_dtile when it
// applies: at least t.DecTileMinTokens sequences (0: never), q and k
// scratch (the kernel writes neither back), head dim 64, 128 or 256 (512's
// partial output would need 256 registers a thread), up to 8 query heads
// a kv head. Splits fill the card about twice over, at least
// decTileKeys keys each (by the longest context rounded up to a power of
// two, so the graph repeats until it doubles), at most 64; they merge in
// a cluster when they fit one (clusterMax, the device's limit; 0: none),
// else through partials and a ticket per (sequence, kv head) (Counters).
func DecodeTile(s DecodeShape, t Tuning, sms, clusterMax int) (Decode, bool) {
	G := 0
	if s.KVHeads > 0 && s.Heads%s.KVHeads == 0 {
		G = s.Heads / s.KVHeads
	}
	if t.DecTileMinTokens <= 0 || s.Tokens < t.DecTileMinTokens || !s.ScratchQK || G < 1 || G > 8 ||
		(s.HeadDim != 64 && s.HeadDim != 128 && s.HeadDim != 256) {
		return Decode{}, false
	}
	ctx := 64
	for ctx < s.MaxCtx {
		ctx *= 2
	}
	hb := s.Tokens * s.KVHeads
	splits := max(1, min(ctx/decTileKeys, 64, (2*decTileBlocksPerSM(s.HeadDim)*sms+hb-1)/hb))
	if s.HeadDim == 256 {
		clusterMax = min(clusterMax, decTileClusterMax256)
	}
	d := Decode{Kernel: fmt.Sprintf("attn_dtile_%d", s.HeadDim), HeadsPerBlock: G, Splits: splits, BlocksPerSplit: hb,
		GridX: s.KVHeads}
	switch {
	case splits > 1 && splits <= clusterMax:
		d.Cluster = splits
	case splits > 1:
		d.Counters = hb
	}
	return d, true
}
