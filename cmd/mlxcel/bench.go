package main

import (
	"os"

	"github.com/mlxcel/mlxcel/internal/bench"

	// The benchmarks create backends by name; registering the CPU backend
	// here keeps `mlxcel bench` usable whatever else main imports.
	// TODO(cuda): import the cuda backend once it registers itself.
	_ "github.com/mlxcel/mlxcel/internal/backend/cpu"
)

func init() {
	register("bench", "benchmarks: decode (one model), ladder (profiles x prompt lengths), serve (load generator)",
		func(args []string) error { return bench.Main(args, os.Stdout, os.Stderr) })
}
