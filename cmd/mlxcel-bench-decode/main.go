// Command mlxcel-bench-decode measures prefill and decode throughput of one
// model, real or synthetic: the same tool as `mlxcel bench decode`, under
// the name the original project's scripts call.
package main

import (
	_ "github.com/mlxcel/mlxcel/internal/backend/backends" // every backend, as in every binary
	"github.com/mlxcel/mlxcel/internal/bench"
)

func main() { bench.CommandMain("mlxcel-bench-decode", bench.DecodeMain) }
