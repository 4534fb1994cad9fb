// Package kernels holds the CUDA backend's kernel sources (*.cu), compiled
// by NVRTC at start (internal/backend/cuda/cudalib caches the images).
package kernels

import (
	"embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

//go:embed *.cu
var files embed.FS

// order is the order the sources are concatenated in: NVRTC has no
// include path, so common.cu is prepended rather than #included, and each
// file may use what the files before it define.
var order = []string{"common.cu", "gemv.cu", "misc.cu", "attention.cu", "mma.cu", "qmm.cu", "qmm_wgmma.cu", "flash.cu", "decode_tile.cu", "moe.cu", "moe_decode.cu", "deltanet.cu", "deltanet_chunk.cu", "sample.cu"}

// programs splits the kernels into the NVRTC programs the backend compiles
// in parallel (one compile of everything took 1.5-2.5 minutes): each line
// is a program emitting the kernels of the files, or of the parts of files
// ("attention.cu:4": partMark), it lists; a file of order on no line is a
// program of its own. Balanced by compile time (CPU seconds of nvcc 12.4
// for sm_90a, each part alone, in the comments), longest first: with
// NVRTC 12.4 each takes 7-9 s, 96 s in all (104 s as one program), and
// the first start waits about the longest where the CPUs are enough. A
// new file needs only its place in order; a slow one can be cut into
// parts and spread over the lines.
var programs = [][]string{
	// decode 512 f16, 256 fp8: 3.9 + 5.6
	{"attention.cu:6", "attention.cu:7"},
	// decode 256 f16, 512 fp8: 4.0 + 5.2
	{"attention.cu:5", "attention.cu:8"},
	// decode 64, 128 f16: 4.0 + 4.9
	{"attention.cu:1", "attention.cu:2"},
	// single-row GEMVs, dense GEMVs: 3.7 + 3.7 + 1.6
	{"gemv.cu:2", "gemv.cu:3", "gemv.cu:4"},
	// fp MoE decode, MoE prefill: 4.4 + 2.7 + 2.3
	{"moe_decode.cu:3", "moe_decode.cu:4", "moe.cu"},
	// decode 256 fp8 4-head, tile: 3.8 + 4.2
	{"attention.cu:10", "decode_tile.cu"},
	// MoE decode routers and gate/up (_x), the small files: 3.8 + 2.6 + 1.8 + 1.3 + 0.7
	{"moe_decode.cu:5", "moe_decode.cu:6", "misc.cu", "sample.cu", "deltanet.cu", "qmm.cu"},
	// MoE decode: 3.7 + 1.8 + 3.1
	{"moe_decode.cu:0", "moe_decode.cu:1", "moe_decode.cu:2"},
	// multi-row GEMVs, prefill attention: 1.9 + 1.9 + 4.6
	{"gemv.cu:0", "gemv.cu:1", "flash.cu"},
	// kv_store, attention, decode 128 fp8, chunked DeltaNet: 1.2 + 6.5 + 0.8
	{"attention.cu:0", "attention.cu:4", "deltanet_chunk.cu"},
	// decode 64 fp8, 256 f16 4-head: 4.5 + 3.2
	{"attention.cu:3", "attention.cu:9"},
	// MoE decode down (_x), MMA GEMVs, warpgroup qmm4: 5.2 + 2.2 + 1.7
	{"moe_decode.cu:7", "mma.cu", "qmm_wgmma.cu"},
}

// Files lists the source files in concatenation order.
func Files() []string { return append([]string(nil), order...) }

func read(f string) string {
	b, err := files.ReadFile(f)
	if err != nil {
		panic(err) // embedded: cannot happen
	}
	return string(b)
}

// Source is the whole kernel source as one program (tests, scripts/kernel-check.sh).
func Source() string {
	var sb strings.Builder
	for _, f := range order {
		fmt.Fprintf(&sb, "// ---- %s ----\n%s\n", f, read(f))
	}
	return sb.String()
}

// Program is one NVRTC program: Source emits the kernels of Files.
type Program struct {
	Name   string   // "mlxcel-attention6": the cache file's and NVRTC's name
	Files  []string // its line of programs: files and parts ("attention.cu:6")
	Source string
}

// kernelDecl starts every kernel definition in the files (in macros too).
const kernelDecl = `extern "C" __global__`

// partMark starts a new part of a file: a line of its own, outside any
// macro. The programs table may give a file's parts to different programs
// ("attention.cu:1" is the second part; "attention.cu" all of them).
const partMark = "//kernels:part"

// parts splits a file's text at its partMark lines.
func parts(f string) []string { return strings.Split(read(f), "\n"+partMark+"\n") }

// Programs returns the programs, each holding common.cu and every file up
// to its last one. A file's kernelDecl becomes MLX_KERNEL, defined before
// each part as kernelDecl when the program owns that part and otherwise
// as a template that is never instantiated: the program still sees the
// earlier parts' device functions and macros, but each kernel is compiled
// by exactly one program. A macro expands MLX_KERNEL where it is used, so
// a kernel belongs to the part that instantiates its macro.
func Programs() []Program {
	lines := slices.Clone(programs)
	listed := map[string]bool{}
	for _, own := range programs {
		for _, o := range own {
			f, _, _ := strings.Cut(o, ":")
			listed[f] = true
		}
	}
	for _, f := range order[1:] { // (common.cu has no kernels)
		if !listed[f] {
			lines = append(lines, []string{f})
		}
	}
	ps := make([]Program, 0, len(lines))
	for _, own := range lines {
		owns := map[string]bool{}
		last := 0
		for _, o := range own {
			owns[o] = true
			f, part, isPart := strings.Cut(o, ":")
			i := slices.Index(order, f)
			if n, err := strconv.Atoi(part); i < 0 || isPart && (err != nil || n < 0 || n >= len(parts(f))) {
				panic("kernels: programs lists " + o + ", which is not in order or has no such part")
			}
			last = max(last, i)
		}
		var sb strings.Builder
		for _, f := range order[:last+1] {
			fmt.Fprintf(&sb, "// ---- %s ----\n", f)
			for i, p := range parts(f) {
				decl := "template <int = 0> __global__"
				if owns[f] || owns[fmt.Sprintf("%s:%d", f, i)] {
					decl = kernelDecl
				}
				fmt.Fprintf(&sb, "#undef MLX_KERNEL\n#define MLX_KERNEL %s\n%s\n", decl, strings.ReplaceAll(p, kernelDecl, "MLX_KERNEL"))
			}
		}
		name := strings.NewReplacer(".cu", "", ":", "").Replace(own[0])
		ps = append(ps, Program{Name: "mlxcel-" + name, Files: append([]string(nil), own...), Source: sb.String()})
	}
	return ps
}
