package cpu

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// kvDtype is what the cpu store keeps for d: auto is float32, exact and
// what the kernels compute in.
func kvDtype(d backend.KVDtype) (backend.KVDtype, error) {
	d = d.Or(backend.KVF32)
	if d.Bytes() == 0 {
		return "", fmt.Errorf("cpu: --kv-cache-dtype %s is not supported (want %s)", d, backend.KVDtypes)
	}
	return d, nil
}

// kvBuf is one layer's K or V in one of the store's dtypes. The kernels
// read float32: float32 storage is read in place, the others are decoded
// a chunk of keys at a time (attention_tiled.go) or a row at a time
// (attention_ref.go), so only the bytes kept shrink, not the arithmetic.
type kvBuf struct {
	f32 []float32
	b16 []uint16 // bfloat16 bits
	f8  []uint8  // E4M3 codes of x/scale
	// scale is the fp8 layer scale (docs/kv-cache.md: 1.0, vLLM's
	// default without checkpoint scales).
	scale float32
}

func newKVBuf(d backend.KVDtype, n int) kvBuf {
	switch d {
	case backend.KVBF16:
		return kvBuf{b16: make([]uint16, n)}
	case backend.KVFP8:
		return kvBuf{f8: make([]uint8, n), scale: 1}
	}
	return kvBuf{f32: make([]float32, n)}
}

// len is the number of values kept.
func (b *kvBuf) len() int { return len(b.f32) + len(b.b16) + len(b.f8) }

func (b *kvBuf) bytes() int { return 4*len(b.f32) + 2*len(b.b16) + len(b.f8) }

// copyWithin copies the n values at src to dst, as stored.
func (b *kvBuf) copyWithin(dst, src, n int) {
	switch {
	case b.f32 != nil:
		copy(b.f32[dst:dst+n], b.f32[src:src+n])
	case b.b16 != nil:
		copy(b.b16[dst:dst+n], b.b16[src:src+n])
	default:
		copy(b.f8[dst:dst+n], b.f8[src:src+n])
	}
}

// put stores src at value offset off, rounding to the dtype.
func (b *kvBuf) put(off int, src []float32) {
	switch {
	case b.f32 != nil:
		copy(b.f32[off:off+len(src)], src)
	case b.b16 != nil:
		dst := b.b16[off : off+len(src)]
		for i, x := range src {
			dst[i] = tensor.F32ToBF16(x)
		}
	default:
		dst, inv := b.f8[off:off+len(src)], 1/b.scale
		for i, x := range src {
			dst[i] = tensor.F32ToE4M3(x * inv)
		}
	}
}

// at returns the n values from off: float32 storage in place, else
// decoded into tmp (len(tmp) >= n), 8 at a time by the kernels of
// kvbuf_amd64.s when they run (a head dim is a multiple of 8 there).
func (b *kvBuf) at(tmp []float32, off, n int) []float32 {
	switch {
	case b.f32 != nil:
		return b.f32[off : off+n]
	case useAsm && n%8 == 0 && n > 0:
		if off < 0 || off+n > b.len() {
			panic("cpu: KV row out of range")
		}
		b.decodeRows(tmp, []int32{int32(off)}, 0, n)
	case b.b16 != nil:
		for i, h := range b.b16[off : off+n] {
			tmp[i] = tensor.BF16ToF32(h)
		}
	default:
		tab, s := tensor.E4M3Table(), b.scale
		for i, c := range b.f8[off : off+n] {
			tmp[i] = tab[c] * s
		}
	}
	return tmp[:n]
}

// decodeRows decodes, with the kernels of kvbuf_amd64.s, d values from
// each of offs (plus off) into dst, one row after the other: a chunk of
// keys in one call. The kernels must run, d be a multiple of 8 and the
// rows lie in the store.
func (b *kvBuf) decodeRows(dst []float32, offs []int32, off, d int) {
	if len(offs) == 0 {
		return
	}
	_ = dst[len(offs)*d-1]
	if b.b16 != nil {
		decodeRowsBF16(&dst[0], &b.b16[off], &offs[0], len(offs), d)
		return
	}
	// 256: the 2^8 the kernel's f16 trick leaves out.
	decodeRowsE4M3(&dst[0], &b.f8[off], &offs[0], len(offs), d, 256*b.scale)
}
