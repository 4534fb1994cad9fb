package cuda

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// The store refuses, naming the flag, every dtype its kernels do not read,
// and the backend says the same before any store exists (the server's
// preflight asks backend.CheckKVDtype before loading weights).
func TestKVDtypeRefused(t *testing.T) {
	if err := backend.CheckKVDtype(&Backend{}, backend.KVFP8); err == nil {
		t.Error("CheckKVDtype(fp8) = nil before the store keeps fp8")
	}
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
