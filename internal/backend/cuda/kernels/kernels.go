// Package kernels holds the CUDA backend's kernel sources (*.cu), compiled
// by NVRTC at start (internal/backend/cuda/cudalib caches the images).
package kernels

import (
	"embed"
	"fmt"
	"strings"
)

//go:embed *.cu
var files embed.FS

// order is the order the sources are concatenated in: NVRTC has no
// include path, so common.cu is prepended rather than #included, and each
// file may use what the files before it define.
var order = []string{"common.cu", "gemv.cu", "misc.cu", "attention.cu", "mma.cu", "qmm.cu", "qmm_wgmma.cu", "flash.cu", "decode_tile.cu", "moe.cu", "moe_decode.cu", "deltanet.cu", "deltanet_chunk.cu", "sample.cu"}

// Files lists the source files in concatenation order.
func Files() []string { return append([]string(nil), order...) }

// Source is the whole kernel source as NVRTC compiles it.
func Source() string {
	var sb strings.Builder
	for _, f := range order {
		b, err := files.ReadFile(f)
		if err != nil {
			panic(err) // embedded: cannot happen
		}
		fmt.Fprintf(&sb, "// ---- %s ----\n%s\n", f, b)
	}
	return sb.String()
}
