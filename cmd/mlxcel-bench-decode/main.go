// Command mlxcel-bench-decode measures prefill and decode throughput of one
// model, real or synthetic: the same tool as `mlxcel bench decode`, under
// the name the original project's scripts call.
package main

import (
	"github.com/mlxcel/mlxcel/internal/bench"

	// Backends register themselves; a binary runs only those it imports.
	_ "github.com/mlxcel/mlxcel/internal/backend/cpu"
	_ "github.com/mlxcel/mlxcel/internal/backend/cuda"
)

func main() { bench.CommandMain("mlxcel-bench-decode", bench.DecodeMain) }
