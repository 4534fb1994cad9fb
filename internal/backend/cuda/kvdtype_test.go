package cuda

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// The store refuses, naming the flag, every dtype its kernels do not read.
func TestKVDtypeRefused(t *testing.T) {
	for _, d := range []backend.KVDtype{"", backend.KVAuto} {
		if err := checkKVDtype(d); err != nil {
			t.Errorf("%q: %v", d, err)
		}
	}
	for _, d := range []backend.KVDtype{backend.KVF32, backend.KVBF16, backend.KVFP8} {
		err := checkKVDtype(d)
		if err == nil || !strings.Contains(err.Error(), "--kv-cache-dtype "+string(d)) {
			t.Errorf("%s: got %v, want a refusal naming --kv-cache-dtype", d, err)
		}
	}
}
