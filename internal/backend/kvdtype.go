package backend

import (
	"fmt"
	"strings"
)

// KVDtype is how a KV store keeps K and V (--kv-cache-dtype, vLLM's flag
// and values where they apply). KVAuto is the backend's own choice: float32
// on cpu (exact, what its kernels compute in), f16 on cuda (what its
// kernels read). A backend refuses at NewKVStore a dtype it does not store.
type KVDtype string

const (
	KVAuto KVDtype = "auto"
	KVF32  KVDtype = "f32"
	KVBF16 KVDtype = "bf16"
	// KVFP8 is OCP FP8 E4M3 (tensor.F32ToE4M3) with a per-layer scale
	// for K and one for V (docs/kv-cache.md says which).
	KVFP8 KVDtype = "fp8"
)

// KVDtypes lists the values ParseKVDtype accepts (the flag's help).
const KVDtypes = "auto|f32|bf16|fp8"

// ParseKVDtype reads a --kv-cache-dtype value; vLLM's spellings bfloat16
// and fp8_e4m3 are taken too. "" is auto.
func ParseKVDtype(s string) (KVDtype, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return KVAuto, nil
	case "f32", "float32":
		return KVF32, nil
	case "bf16", "bfloat16":
		return KVBF16, nil
	case "fp8", "fp8_e4m3":
		return KVFP8, nil
	}
	return "", fmt.Errorf("--kv-cache-dtype %q: want one of %s", s, KVDtypes)
}

// Or is d, or def when d is auto (or unset).
func (d KVDtype) Or(def KVDtype) KVDtype {
	if d == "" || d == KVAuto {
		return def
	}
	return d
}

// Bytes is one element's size; 0 for auto, whose size is the backend's.
func (d KVDtype) Bytes() int {
	switch d {
	case KVF32:
		return 4
	case KVBF16:
		return 2
	case KVFP8:
		return 1
	}
	return 0
}

// KVDtypeUsage is the --kv-cache-dtype help line the commands share.
const KVDtypeUsage = "how the KV cache keeps K and V: " + KVDtypes + " (auto: f32 on cpu, f16 on cuda; fp8: OCP e4m3, cpu and cuda; f32, bf16: cpu only; docs/kv-cache.md)"

// String and Set make a *KVDtype a flag.Value (--kv-cache-dtype).
func (d KVDtype) String() string { return string(d.Or(KVAuto)) }

func (d *KVDtype) Set(s string) error {
	v, err := ParseKVDtype(s)
	if err == nil {
		*d = v
	}
	return err
}
