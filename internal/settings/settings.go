// Package settings is the one table of environment variables mlxcel
// reads (MLXCEL_*). Every reader goes through Get, so the table, the docs
// (docs/settings.md, checked by a test) and the code cannot drift apart.
// Kernel variants are not settings: the winners are the code path, and
// experiments live in tests and benchmarks.
package settings

import (
	"fmt"
	"os"
)

// Kind says who a variable is for.
type Kind string

const (
	// Setting: what a user may need on some machine (a library path, a
	// cache folder, a key).
	Setting Kind = "setting"
	// Diagnostic: for finding a problem; the default is what runs.
	Diagnostic Kind = "diagnostic"
)

// Var is one environment variable.
type Var struct {
	Name    string
	Default string // what an unset variable means, for the docs
	Kind    Kind
	Doc     string // one line
}

// Table lists every MLXCEL_* variable the product reads.
var Table = []Var{
	{"MLXCEL_API_KEY", "no auth", Setting, "the API key mlxcel serve requires when --api-key is not given (empty: no auth)"},
	{"MLXCEL_PROFILES", "the built-in profiles", Setting, "a folder of synthetic-weight profiles (<name>.json) searched before the built-in ones"},
	{"MLXCEL_TOKENIZERS", "shared/testdata/tokenizers", Setting, "a folder of tokenizers (<name>/tokenizer.json) for profiles, searched before shared/testdata/tokenizers"},
	{"MLXCEL_CUDA_LIB", "the loader's search", Setting, "libcuda.so.1, or its folder, when the loader's search does not find it"},
	{"MLXCEL_NVRTC_LIB", "the loader's search", Setting, "libnvrtc.so, or its folder (CUDA 12 or 13)"},
	{"MLXCEL_CUBLAS_LIB", "the loader's search", Setting, "libcublas.so, or its folder"},
	{"MLXCEL_CUDA_CACHE", "the user cache folder's mlxcel/cuda", Setting, "the folder of compiled kernel images, keyed by source, architecture and NVRTC version"},
	{"MLXCEL_CUDA_GRAPHS", "1", Diagnostic, "0 launches every kernel directly instead of replaying CUDA graphs"},
	{"MLXCEL_CUDA_PROFILE", "0", Diagnostic, "N > 0 times each kernel of the Nth step and prints a per-kernel table to stderr"},
	{"MLXCEL_TEST_SEED", "the clock", Diagnostic, "the seed of the backend conformance suite's random inputs (a failing run logs it)"},
}

func lookup(name string) Var {
	for _, v := range Table {
		if v.Name == name {
			return v
		}
	}
	panic(fmt.Sprintf("settings: %s is not in the table", name)) // a programming error
}

// Get returns the variable's value ("" when unset: the caller applies the
// default the table describes).
func Get(name string) string {
	lookup(name)
	return os.Getenv(name)
}
