package main

import (
	"os"

	"github.com/mlxcel/mlxcel/internal/server"
)

func init() {
	register("serve", "OpenAI-compatible HTTP server (same flags as mlxcel-server)", func(args []string) error {
		// The flags live in the server package so mlxcel-server takes
		// exactly the same ones.
		return server.Main("mlxcel serve", args, os.Stderr)
	})
}
