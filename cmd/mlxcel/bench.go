package main

import (
	"os"

	"github.com/mlxcel/mlxcel/internal/bench"
)

func init() {
	register("bench", "benchmarks: decode (one model), ladder (profiles x prompt lengths), serve (load generator)",
		func(args []string) error { return bench.Main(args, os.Stdout, os.Stderr) })
}
