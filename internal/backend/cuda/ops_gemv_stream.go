//go:build linux

package cuda

import (
	"os"
	"strconv"
)

// The persistent one-row product for large matrices (qgemvs4_bf*,
// kernels/gemv_stream.cu): a qgemvm launch, same arguments and row groups,
// whose blocks stay resident and stream their row groups' weights through
// shared memory. gemvMulti picks it for 4-bit bf16-scaled matrices with K
// of at least 4096 and at least streamMinBytes of weights (or joining a
// launch that already streams), fuseGLU keeps it, and streamGrid sizes its
// grid to what fits on the device at once.

// streamMinBytesDefault: Llama-3.1-8B's gate, up and down (29 MB each)
// and LM head stream; its q/k/v and o (8 MB and less) keep qgemvm.
// MLXCEL_CUDA_STREAM_MIN (MiB) overrides it for measuring.
const streamMinBytesDefault = 16 << 20

// streamConfig reads MLXCEL_CUDA_STREAM (0: off; 3 or 6: the variants with
// that many pipeline stages; the default has 4), MLXCEL_CUDA_STREAM_MIN
// and MLXCEL_CUDA_STREAM_GRID (the grid's blocks, for tests), and lets
// every stage variant use its shared memory (the benchmark switches).
func (b *Backend) streamConfig() {
	switch v := os.Getenv("MLXCEL_CUDA_STREAM"); v {
	case "3", "4", "6":
		b.streamStages = int(v[0] - '0')
	default:
		return // off by default: measured slower than qgemvm (notes/cuda-kernels.md, session 6)
	}
	b.streamMin = streamMinBytesDefault
	if v, err := strconv.Atoi(os.Getenv("MLXCEL_CUDA_STREAM_MIN")); err == nil && v >= 0 {
		b.streamMin = v << 20
	}
	if v, err := strconv.Atoi(os.Getenv("MLXCEL_CUDA_STREAM_GRID")); err == nil && v > 0 {
		b.streamBlocks = v // tests: few blocks, many row groups each
	}
	want := b.streamStages
	for _, st := range []int{3, 4, 6} {
		b.streamStages = st
		smem := streamSmem(st)
		for _, x := range []string{"", "_x"} {
			if smem > b.d.attr(b.dev, attrMaxSmemOptin) ||
				b.d.call("cuFuncSetAttribute", b.d.funcSetAttribute, b.fn(b.streamBase()+x), funcAttrMaxDynamicSmem, uintptr(smem)) != nil {
				if st == want {
					want = 0 // the device refuses: qgemvm serves every product
				}
			}
		}
	}
	b.streamStages = want
}

// streamSmem is the dynamic shared memory of a qgemvs kernel with the
// given stages (QsSmem in gemv_stream.cu: 8 rows x 128 lanes x (16 bytes
// of weights + 4 of scale and bias) a stage).
func streamSmem(stages int) int { return stages * 8 * 128 * (16 + 4) }

func (b *Backend) streamBase() string {
	if b.streamStages == 4 {
		return "qgemvs4_bf"
	}
	return "qgemvs4_bf_s" + strconv.Itoa(b.streamStages)
}

// streamKernel names the qgemvs kernel for a one-row product with w, or ""
// when w has another form: it needs 4 bits, bf16 scales and at least 128
// 16-byte chunks a row (every lane of the block has a chunk); _x is the
// form for exactly 128, whose activations stay in registers.
func (b *Backend) streamKernel(w *weight) string {
	nc := w.in * w.bits / 128
	if b.streamStages == 0 || w.bits != 4 || w.sbF32 || nc < 128 || b.multiVariant != "" {
		return ""
	}
	if nc == 128 {
		return b.streamBase() + "_x"
	}
	return b.streamBase()
}

// isStream reports whether fn is one of this backend's qgemvs kernels.
func (b *Backend) isStream(fn uintptr) bool {
	if b.streamStages == 0 {
		return false
	}
	return fn == b.fns[b.streamBase()] || fn == b.fns[b.streamBase()+"_x"]
}

// streamGrid gives a qgemvs launch its shared memory and a grid of at
// most the blocks resident at once (more would queue behind the first
// wave); the kernel walks its row groups whatever the grid.
func (b *Backend) streamGrid(l *launch) {
	if !b.isStream(l.fn) {
		return
	}
	smem := streamSmem(b.streamStages)
	l.smem = uint32(smem)
	blocks := b.streamBlocks
	if blocks == 0 {
		// Blocks resident per SM: shared memory binds (1 KB reserved a
		// block, 256 bytes of static split-K sums), registers do not
		// (<= 128 a thread, 128 threads).
		per := b.d.attr(b.dev, attrMaxSmemPerSM) / (smem + 1024 + 256)
		blocks = max(1, min(per, 4)) * b.SMs
	}
	l.gx = min(l.gx, uint32(blocks))
}
