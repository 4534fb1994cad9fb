//go:build !linux

package cuda

import (
	"fmt"
	"runtime"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// The CUDA backend loads libcuda through dlopen, which this package only
// wires up on Linux.
func init() {
	backend.Register("cuda", func(backend.Options) (backend.Backend, error) {
		return nil, fmt.Errorf("cuda: not supported on %s", runtime.GOOS)
	})
}
