package main

import (
	"os"

	"github.com/mlxcel/mlxcel/internal/bench"

	// The benchmarks create backends by name (--backend cpu|cuda|auto);
	// registering both here keeps `mlxcel bench` complete whatever else
	// main imports.
	_ "github.com/mlxcel/mlxcel/internal/backend/cpu"
	_ "github.com/mlxcel/mlxcel/internal/backend/cuda"
)

func init() {
	register("bench", "benchmarks: decode (one model), ladder (profiles x prompt lengths), serve (load generator)",
		func(args []string) error { return bench.Main(args, os.Stdout, os.Stderr) })
}
