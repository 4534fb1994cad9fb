// Package plan holds the CUDA backend's launch planners: pure functions
// from shapes, device facts and tuning to the kernel, grid, splits and
// cluster a launch takes. They touch no device, so they are tested with
// tables on any machine; the backend's ops only compose their answers
// with scratch and arguments. Every default here was chosen by a
// measurement on the H200 (docs/cuda.md, notes/cuda-kernels.md).
package plan

import "fmt"

// Tuning holds decode attention's and the many-row products' measured
// sizes. They are not settings:
// DefaultTuning is what runs; tests and benchmarks set other values to
// check or measure them.
type Tuning struct {
	DecSplitKeys   int // keys per split block
	DecWaves       int // blocks an SM at most, splits included (0: by kernel, DecodeWaves)
	DecHeads       int // query heads a block at short contexts (0: the whole group)
	DecHeadsMaxCtx int // longest (rounded) context that takes DecHeads
	DecLongHeads   int // query heads a block past DecHeadsMaxCtx (-1: LongHeads by context, 0: the group)
	DecClusterMax  int // the most splits merged in a thread block cluster (0: off; the device caps it)
	QMMMinRows     int // fewest activation rows a 4-bit product takes the fused qmm4 kernels with (0: never)
	QMMMaxRows     int // most rows it takes them with (more go to cuBLAS on dequantized weights)
	// DecTileMinTokens: fewest sequences of a decode step whose attention
	// runs on the tensor-core tile kernel (DecodeTile; 0: never).
	DecTileMinTokens int
	QMMVariant       string // the qmm4 kernel form for every product ("": by the matrix, qmmForm)
	MoEGEMMRows      int    // fewest tokens of a step whose MoE takes the grouped expert GEMM (0: MoEGEMMFrom's rule)
	// QMMWarpgroup: the device runs the warpgroup-MMA forms of the
	// many-row products (sm_90a; the backend sets it).
	QMMWarpgroup bool
	// Clusters: the device launches thread block clusters (sm_90 and
	// later; the backend clears it elsewhere), which qmm4's and qmma4's K
	// splits merge their partials in; without them the products run
	// unsplit.
	Clusters bool
	// DecGenericWide: decode steps of head dims 256 and 512 take the
	// generic attention kernel, as before attn_decode and attn_dtile took
	// them (TestWideDecodeBench's baseline; false by default).
	DecGenericWide bool
	// DeltaChunkMin: fewest positions of a sequence in a step for which
	// Gated DeltaNet runs the chunked delta rule (DeltaChunk; 0: never).
	DeltaChunkMin int
}

// DefaultTuning is what a default run uses.
func DefaultTuning() Tuning {
	return Tuning{DecSplitKeys: DecSplitKeys, DecHeads: DecHeadsPerBlock, DecHeadsMaxCtx: DecHeadsMaxCtx, DecLongHeads: -1, DecClusterMax: 16,
		QMMMinRows: QMMMinRows, QMMMaxRows: QMMMaxRows, DecTileMinTokens: DecTileMinTokens,
		DeltaChunkMin: DeltaChunkMin, Clusters: true}
}

// DecHeadsPerBlock is attn_decode's default number of query heads a block
// at short contexts: a group larger than this is split over blocks.
// Measured on the H200: Qwen3-30B-A3B (8 query heads per kv head) decodes
// at 288-291 tok/s with 2 or 4 against 243 with 8, and with Qwen3's q/k
// norms folded, 314-325 with 1 against 299-320 with 2; Llama-3.1-8B
// unchanged within noise. Only one-token steps take groups: at 16
// sequences the launch is already 128 blocks wide, and serving at
// concurrency 16 fell from 1847 to 1669-1705 tok/s with them.
const DecHeadsPerBlock = 1

// DecHeadsMaxCtx is the longest context (rounded up to a power of two) at
// which one-token steps take DecHeads. At long contexts the splits fill
// the device, and a block serving more of its kv head's group reads each
// K/V row fewer times (LongHeads).
const DecHeadsMaxCtx = 1024

// DecSplitKeys is attn_decode's target of keys per split block: 4 warps
// take 4 keys each per round of loads, so 16 keys is one round. Measured
// at 192 keys (Llama-3.1-8B shapes): 16 keys 368.8 tok/s, 32 360.5, 64
// 349.9, one split 270.6.
const DecSplitKeys = 16

// LongHeads is the number of query heads a one-token step's block serves
// past DecHeadsMaxCtx when a kv head's group is larger than the _h4 kernel
// takes whole (Qwen3-30B-A3B's 8; Llama's 4 stay whole): set (0: the whole
// group), or by the context, rounded up to a power of two, when set < 0.
// The group then runs on the _h2/_h4 kernels (102/121 registers, 4 blocks
// an SM) rather than the general one (164-200 registers, 2 an SM). Qwen3
// decode tok/s after a prompt of (s10r6/s10r7, same machine):
//
//	heads a block   1024    2048    8192   32768
//	8 (group)          -   213.1   155.8    75.9
//	4              299.0   279.8   206.1   101.3
//	2              369.1   330.2   201.2    79.8
//	1                  -   303.0   155.5    52.3
func LongHeads(set, ctx int) int {
	switch {
	case set >= 0:
		return set
	case ctx <= 4096:
		return 2
	}
	return 4
}

// DecodeWaves caps attn_decode's grid at that many blocks an SM. The
// small kernels (_h1/_h2/_h4, 93-121 registers) take 4: at ~264 keys
// Qwen3's and Llama's 32 blocks then split 17 ways, one round of K/V loads
// each (s8r5: Qwen3 396.3 against 388.1 tok/s with 2, Llama 454.3 against
// 449.9); past DecHeadsMaxCtx Llama went from 215.9 to 251.6 tok/s after
// 8192 prompt tokens, 93.4 to 137.3 after 32768 (s9r2). The general
// kernels (164-200 registers: 2-3 blocks an SM) take 2: with 4, Qwen3 ran
// at 341-345 against 359-363 (s8r1).
func DecodeWaves(small bool) int {
	if small {
		return 4
	}
	return 2
}

// DecodeShape is one decode-attention launch: Tokens one-token rows of
// Heads query heads over KVHeads, the longest context of the step, and
// whether q and k are scratch (AttnParams.ScratchQK: nothing reads them
// after attention, so the kernel need not write them back).
type DecodeShape struct {
	Tokens, Heads, KVHeads, HeadDim, MaxCtx int
	ScratchQK                               bool
}

// Decode is the plan of an attn_decode launch.
type Decode struct {
	Kernel         string // attn_decode_<hd>[_h<g>][c]
	HeadsPerBlock  int    // query heads a block serves
	Splits         int    // blocks a (token, head group) splits its keys over (grid z)
	Cluster        int    // splits merged in one thread block cluster (0: by the last block's ticket)
	BlocksPerSplit int    // blocks of one split: tokens x head groups
	GridX          int    // head groups of all kv heads
	Counters       int    // merge counters the launch needs (0: none)
	WriteBack      bool   // q and k written back rotated and normalised
}

// DecodeApplies reports whether attn_decode takes a decode step of these
// head dims and groups (the caller also checks the tensors' layouts). At
// head dims 256 and 512 any group runs, on blocks of at most wideHeads
// of its heads.
func DecodeApplies(heads, kvHeads, headDim int) bool {
	if kvHeads <= 0 || heads%kvHeads != 0 {
		return false
	}
	switch headDim {
	case 64, 128:
		return heads/kvHeads <= 8
	case 256, 512:
		return true
	}
	return false
}

// wideHeads is the most query heads an attn_decode block serves at head
// dims 256 (_h4: 192-231 registers) and 512 (_h2: 167-239); 0: no cap
// (64 and 128 have the general kernel of up to 8).
func wideHeads(hd int) int {
	switch hd {
	case 256:
		return 4
	case 512:
		return 2
	}
	return 0
}

// capHeads is the largest of the small kernels' 4, 2, 1 heads a block
// that is at most mx and divides the group G.
func capHeads(G, mx int) int {
	for gl := mx; gl > 1; gl /= 2 {
		if G%gl == 0 {
			return gl
		}
	}
	return 1
}

// DecodeAttention plans a decode step's attention: about DecSplitKeys keys
// a split block, by the longest context rounded up to a power of two (so
// the launch, and its graph, repeats until the context doubles), at most
// enough blocks to fill the device DecodeWaves times; the small kernels'
// splits merge in a cluster when they fit one.
func DecodeAttention(s DecodeShape, t Tuning, sms int) Decode {
	return decodeAttention(s, t, sms, false)
}

// SharedDecodeApplies reports whether attn_decode takes a KV-shared
// layer's decode step (its _s kernels: head dims 256 and 512).
func SharedDecodeApplies(heads, kvHeads, headDim int) bool {
	return (headDim == 256 || headDim == 512) && DecodeApplies(heads, kvHeads, headDim)
}

// DecodeShared plans a KV-shared layer's decode step (SharedDecodeApplies)
// as DecodeAttention does, on the _s kernels: no cluster (they merge by
// the ticket); with WriteBack only q is written back (there is no k).
func DecodeShared(s DecodeShape, t Tuning, sms int) Decode {
	return decodeAttention(s, t, sms, true)
}

func decodeAttention(s DecodeShape, t Tuning, sms int, shared bool) Decode {
	ctx := 64
	for ctx < s.MaxCtx {
		ctx *= 2
	}
	G := s.Heads / s.KVHeads
	gl := G
	if s.Tokens == 1 && t.DecHeads > 0 && t.DecHeads < G && G%t.DecHeads == 0 && ctx <= t.DecHeadsMaxCtx {
		gl = t.DecHeads
	} else if lh := LongHeads(t.DecLongHeads, ctx); s.Tokens == 1 && ctx > t.DecHeadsMaxCtx && G > 4 && lh > 0 && lh < G && G%lh == 0 {
		gl = lh // e.g. Qwen3's groups of 8 as blocks of 2 or 4
	}
	if mx := wideHeads(s.HeadDim); mx > 0 && (gl > mx || (gl != 1 && gl != 2 && gl != 4)) {
		gl = capHeads(G, mx) // e.g. Gemma 4's full layers (8 heads of 512) as 4 blocks of 2
	}
	hb := s.Tokens * s.KVHeads * (G / gl)
	small := gl == 1 || gl == 2 || gl == 4
	waves := t.DecWaves
	if waves == 0 {
		waves = DecodeWaves(small)
	}
	splits := max(1, min(ctx/t.DecSplitKeys, 64, (waves*sms+hb-1)/hb))
	// Clusters only without the q/k write-back, whose tickets the _c
	// kernels do not keep. One-head blocks (short contexts) take at most
	// 17 splits: 17 are cut to a cluster of 16; otherwise a head group
	// clusters only when its splits fit one.
	cz := 0
	if t.DecClusterMax > 0 && s.ScratchQK && small && splits > 1 && !shared {
		if gl == 1 && splits <= t.DecClusterMax*17/16 {
			splits = min(splits, t.DecClusterMax)
		}
		if splits <= t.DecClusterMax {
			cz = splits
		}
	}
	kernel := decodeKernel(s.HeadDim, gl, small, cz > 0, shared)
	// Counters: one per (token, head group) for the splits, then one per
	// (token, kv head) for the head groups.
	cnt := 0
	if splits > 1 || gl < G {
		cnt = hb + s.Tokens*s.KVHeads
	}
	return Decode{Kernel: kernel, HeadsPerBlock: gl, Splits: splits, Cluster: cz, BlocksPerSplit: hb,
		GridX: s.KVHeads * (G / gl), Counters: cnt, WriteBack: !s.ScratchQK}
}

// decodeKernels are attn_decode's names by head dim (64, 128, 256, 512),
// heads a block (the general kernel, _h1, _h2, _h4) and cluster merge:
// constants, since a plan is made for every layer of every step. (256 has
// no general kernel, 512 no general nor _h4: wideHeads keeps them out;
// the KV-shared _s forms exist at 256 and 512 only.)
var decodeKernels = func() (n [4][4][3]string) {
	for d, hd := range []int{64, 128, 256, 512} {
		for g, h := range []string{"", "_h1", "_h2", "_h4"} {
			n[d][g][0] = fmt.Sprintf("attn_decode_%d%s", hd, h)
			if h != "" {
				n[d][g][1] = n[d][g][0] + "c"
				n[d][g][2] = n[d][g][0] + "s"
			}
		}
	}
	return n
}()

func decodeKernel(hd, gl int, small, cluster, shared bool) string {
	d, g, c := 0, 0, 0
	switch hd {
	case 128:
		d = 1
	case 256:
		d = 2
	case 512:
		d = 3
	}
	switch {
	case small && gl == 4:
		g = 3
	case small:
		g = gl // 1 or 2
	}
	switch {
	case cluster:
		c = 1
	case shared:
		c = 2
	}
	return decodeKernels[d][g][c]
}

// FlashTile is the query rows of a flash-attention tile (FA_ROWS in
// kernels/flash.cu): a step's prefill rows are cut into tiles of at most
// this many consecutive rows of one sequence.
const FlashTile = 128

// Flash2Geom is the shape of flash2_attn_<hd> (f2cfg in kernels/flash.cu):
// threads a block, query rows a block (a divisor of FlashTile: each query
// tile is served by FlashTile/rows blocks), keys a K/V tile, and the bytes
// of its score-exchange slots (HD 512: the pair of warps sharing 16 rows
// sums its halves of S through 2 KB a warp).
func Flash2Geom(hd int) (threads, rows, keys, xchg int) {
	switch hd {
	case 256:
		return 256, 128, 64, 0
	case 512:
		return 256, 64, 32, 8 * 2048
	}
	return 128, FlashTile, 64, 0
}

// Flash2Smem is the dynamic shared memory of flash2_attn_<hd>: the block's
// Q rows, two stages of a K and a V tile, rows padded by 8 halves, then
// the exchange slots. HD 128: 104448 bytes, two blocks to an H100/H200 SM;
// HD 256: 202752 and HD 512: 216064, one.
func Flash2Smem(hd int) int {
	_, rows, keys, xchg := Flash2Geom(hd)
	return (rows+4*keys)*(hd+8)*2 + xchg
}

// Flash is the plan of a flash2_attn launch over tiles query tiles.
type Flash struct {
	Kernel         string
	GridX, Threads int
	Smem           int
}

// FlashAttention plans prefill attention over tiles query tiles of head
// dim hd (64, 128, 256 or 512).
func FlashAttention(hd, tiles int) Flash {
	threads, rows, _, _ := Flash2Geom(hd)
	return Flash{Kernel: fmt.Sprintf("flash2_attn_%d", hd), GridX: tiles * (FlashTile / rows), Threads: threads, Smem: Flash2Smem(hd)}
}

// GenericSplits is the generic attention kernel's splits of each (token,
// head): enough blocks to fill the device twice, at most 32.
func GenericSplits(tokens, heads, sms int) int {
	if work := tokens * heads; work < 2*sms {
		return min(32, (2*sms+work-1)/work)
	}
	return 1
}
