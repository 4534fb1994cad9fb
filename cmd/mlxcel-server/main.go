// Command mlxcel-server is the OpenAI-compatible HTTP server on its own,
// for images and services that want one binary per job. It takes exactly
// the flags of `mlxcel serve` (see docs/server.md).
package main

import (
	"fmt"
	"os"

	"github.com/mlxcel/mlxcel/internal/server"
)

func main() {
	if err := server.Main("mlxcel-server", os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "mlxcel-server: %v\n", err)
		os.Exit(1)
	}
}
