// Package backends links every backend into a binary. Backends register
// themselves by name from init; importing this package (internal/app does)
// is the one place that decides which exist, so no command can ship
// without the CUDA backend because of what else it happens to import.
package backends

import (
	_ "github.com/mlxcel/mlxcel/internal/backend/cpu"  // registers "cpu"
	_ "github.com/mlxcel/mlxcel/internal/backend/cuda" // registers "cuda" (loads libcuda at run time)
)
