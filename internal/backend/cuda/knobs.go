package cuda

import (
	"math"
	"os"
	"slices"
	"strconv"
)

// readKnobs sets the backend's choices that come from the environment
// alone (MLXCEL_CUDA_*; docs/cuda.md lists them): the kernels and paths
// each op takes, with the measured defaults. New calls it before the
// choices that need the device (flash2's shared memory, PDL, clusters);
// the host-only recording benchmarks call it too, so they record what a
// default run launches.
func (b *Backend) readKnobs() {
	b.graphs.init(os.Getenv("MLXCEL_CUDA_GRAPHS") != "0")
	b.fuse = os.Getenv("MLXCEL_CUDA_FUSE") != "0"
	b.useMMA = os.Getenv("MLXCEL_CUDA_MMA") != "0"
	b.useFlash = os.Getenv("MLXCEL_CUDA_FLASH") != "0"
	b.useDecAttn = os.Getenv("MLXCEL_CUDA_DECATTN") != "0"
	b.gemmBF16 = os.Getenv("MLXCEL_CUDA_GEMM") != "tf32"
	b.moeGroup = os.Getenv("MLXCEL_CUDA_MOEGROUP") != "0"
	b.moeDec = os.Getenv("MLXCEL_CUDA_MOEDEC") != "0"
	b.flashV = 2
	if os.Getenv("MLXCEL_CUDA_FLASHV") == "1" {
		b.flashV = 1
	}
	// Off by default: correct (2.3e-4 against 1e-3) but slower than
	// qgemvm on every decode shape on the H200 (14336x4096 21.3 against
	// 14.6 us; notes/cuda-kernels.md, session 6). MLXCEL_CUDA_GEMVT=1 (or
	// w4, 4 warps a block) turns it on for measuring.
	// The f16x2 one-row kernel (qgemvh4, gemv.cu), not yet measured on a
	// GPU: MLXCEL_CUDA_GEMVH=1 (8 rows a block) or 16.
	if v := os.Getenv("MLXCEL_CUDA_GEMVH"); v == "1" || v == "16" {
		b.gemvHalf = v
	}
	switch os.Getenv("MLXCEL_CUDA_GEMVT") {
	case "1":
		b.gemvTC = true
	case "w4":
		b.gemvTC, b.tcVariant = true, "w4"
	}
	b.fuseRoPE = os.Getenv("MLXCEL_CUDA_ROPEFUSE") != "0"
	// The heads fold only by default (Qwen3's q/k norms inside attn_decode,
	// with one query head a block): Qwen3-30B-A3B 314-325 against 310-318
	// tok/s with no fold (seventh session, docs/cuda.md). The gemv and
	// router folds each measured slower than none; all three together
	// lost 7 of 8 A/B pairs. MLXCEL_CUDA_NORMFUSE=0 turns all off.
	b.folds = defaultNormFolds
	if v, set := os.LookupEnv("MLXCEL_CUDA_NORMFUSE"); set {
		b.folds = parseNormFolds(v)
	}
	b.argmaxSplit = os.Getenv("MLXCEL_CUDA_ARGMAX") != "rows"
	b.prof.at = profileAt()
	b.prof.skip = skipKernels()
	b.decSplitKeys = decSplitKeys
	b.decHeads, b.decHeadsMaxCtx = decHeadsPerBlock, decHeadsMaxCtx
	if v, err := strconv.Atoi(os.Getenv("MLXCEL_CUDA_DECHEADS")); err == nil && v >= 0 {
		b.decHeads, b.decHeadsMaxCtx = v, math.MaxInt
	}
	b.decLongHeads = -1 // by the context (longHeads)
	if v, err := strconv.Atoi(os.Getenv("MLXCEL_CUDA_DECLONGHEADS")); err == nil && v >= 0 {
		b.decLongHeads = v
	}
	if v, err := strconv.Atoi(os.Getenv("MLXCEL_CUDA_DECSPLITKEYS")); err == nil && v > 0 {
		b.decSplitKeys = v
	}
	// Splits of attn_decode at most fill decWaves blocks an SM (0: by
	// kernel, decodeWaves). MLXCEL_CUDA_DECWAVES sets it for all.
	b.decPF = os.Getenv("MLXCEL_CUDA_DECPF") == "1"
	b.decH1 = os.Getenv("MLXCEL_CUDA_DECH1") != "0"
	b.decHG = os.Getenv("MLXCEL_CUDA_DECHG") != "0"
	// The small kernels' splits (at most 16) launched as one thread block
	// cluster, merged through distributed shared memory (the _c kernels):
	// Qwen3-30B-A3B 463.0 against 453.1/456.3 tok/s, Llama-3.1-8B level,
	// 455.3/455.8 against 454.5 (s10r1, interleaved). New lowers this to
	// 8 (portable clusters) or 0 (before Hopper). MLXCEL_CUDA_DECCLUSTER=0: off.
	b.decClusterMax = 0
	if os.Getenv("MLXCEL_CUDA_DECCLUSTER") != "0" {
		b.decClusterMax = 16
	}
	// MoE decode (ninth session, s9r1, Qwen3-30B-A3B at batch 1): routing by
	// the router's whole last block (393.3 -> 416.9 tok/s; MLXCEL_CUDA_ROUTE=warp
	// gives back the one-warp router) and the gate/up kernel at six blocks an
	// SM (o6: 80 registers, 40 bytes spilled, one wave of 768 blocks where
	// 5 an SM made 1.16 waves; 393.3 -> 415.0). MLXCEL_CUDA_MOEGU=32/64/128
	// picks a plain row-group width instead (32 lost: 386.6). (An L2 bulk
	// prefetch of the chosen experts by the router's last block lost badly,
	// 152.9, and was removed: notes/cuda-kernels.md.)
	b.routeBlock = os.Getenv("MLXCEL_CUDA_ROUTE") != "warp"
	// The down projection and the slot sum in one pass, a block of 8 warps
	// doing every slot of its rows (no scratch, ticket or second pass):
	// Qwen3-30B-A3B 451.3/453.6 against 439.0/433.4 tok/s (s9r5,
	// interleaved; with 4 warps, two slots each, it lost: 423, s9r4).
	// MLXCEL_CUDA_MOEDOWN=sum: moe_down_sum.
	b.moeDownAcc = os.Getenv("MLXCEL_CUDA_MOEDOWN") != "sum"
	// gate/up triggers the down kernel's launch only after its wait (the
	// router done), and down_sum reads its expert and loads its first
	// weight chunk before waiting for gate/up: Qwen3-30B-A3B 443.0/443.7
	// against 439.7/438.4 tok/s (s9r3, interleaved). MLXCEL_CUDA_MOEPRE=0: off.
	b.moePre = os.Getenv("MLXCEL_CUDA_MOEPRE") != "0"
	b.moeGUO6 = true
	switch v := os.Getenv("MLXCEL_CUDA_MOEGU"); v {
	case "32", "64", "128":
		b.moeGULanes, _ = strconv.Atoi(v)
		b.moeGUO6 = false
	}
	if v, err := strconv.Atoi(os.Getenv("MLXCEL_CUDA_DECWAVES")); err == nil && v > 0 {
		b.decWaves = v
	}
	// MLXCEL_CUDA_GEMV1=85 (say) picks a one-row 4-bit GEMV variant, for
	// measuring one through the model code.
	if v := os.Getenv("MLXCEL_CUDA_GEMV1"); v != "" && slices.Contains(multiKernels, variantKernel(v)) {
		b.multiVariant = v
	}
	// qmma4 (2-16 activation rows, bf16 scales): the _xc kernels by default
	// (x loaded with the weights, as _xp, which took batch-16 decode from
	// 1933 to 2117 tok/s and serving at concurrency 16 from 4.92x to 5.25x
	// concurrency 1; _xc without the branches that made _xp's shuffles
	// collective: 5-15% faster than _xp on 8 of 9 shapes at 2, 8 and 16
	// rows, the ninth within 2%, benchmarks/cuda_h200_2026-11-29_v10_gemv.csv;
	// not yet measured through serving). MLXCEL_CUDA_MMAV=none gives the
	// plain kernels, xp/d2/d8/o2/r4 the other variants (mma.cu).
	b.mmaVariant = "xc"
	switch v := os.Getenv("MLXCEL_CUDA_MMAV"); v {
	case "none":
		b.mmaVariant = ""
	case "d2", "d8", "o2", "r4", "xp", "xc":
		b.mmaVariant = v
	}
}
