//go:build linux

package cuda

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// Tensor maps (CUtensorMap, 128 bytes) for the Tensor Memory Accelerator:
// the warpgroup qmm4 forms copy each 64-wide K slab of x's bf16 copy into
// shared memory with one cp.async.bulk.tensor, swizzled (128B) into the
// layout the wgmma B operand reads, rows past M filled with zeros. The maps
// live in device memory (the kernels take their address); one is encoded
// and uploaded the first time a (buffer, rows, K, box rows) is launched, and
// never rewritten, so no kernel can read a map the TMA unit has cached
// stale. When the slots run out, the products fall back to qmm4.

const (
	tensorMapBytes = 128
	tensorMapSlots = 1024
)

// CUtensorMap enums (cuda.h).
const (
	tmapBF16        = 9 // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
	tmapSwizzle128B = 3 // CU_TENSOR_MAP_SWIZZLE_128B
	tmapL2Promo256B = 3 // CU_TENSOR_MAP_L2_PROMOTION_L2_256B
)

type tensorMapKey struct {
	ptr             uintptr
	rows, cols, box int
}

// tensorMaps holds the device copies of the encoded maps, and the host
// scratch they are encoded in (the encoder wants 64-byte alignment, which
// Go gives no variable; the Backend lives on the heap, which does not move).
type tensorMaps struct {
	buf     devBuf
	used    int
	at      map[tensorMapKey]uintptr
	scratch [tensorMapBytes + 64]byte
}

// bf16RowsMap is the device address of the map of a bf16 [rows][cols]
// matrix at ptr read in boxes of 64 columns by box rows, or 0 when maps
// are not available (driver without cuTensorMapEncodeTiled, slots used up,
// encoding refused).
func (b *Backend) bf16RowsMap(ptr uintptr, rows, cols, box int) uintptr {
	k := tensorMapKey{ptr, rows, cols, box}
	if a, ok := b.tmaps.at[k]; ok {
		return a
	}
	if b.d.TensorMapEncodeTiled == 0 || b.tmaps.used >= tensorMapSlots {
		return 0
	}
	unbind := b.bind()
	defer unbind()
	if b.tmaps.buf.ptr == 0 {
		p, err := b.alloc(tensorMapSlots * tensorMapBytes)
		if err != nil {
			return 0
		}
		b.tmaps.buf = devBuf{ptr: p, size: tensorMapSlots * tensorMapBytes}
		b.tmaps.at = map[tensorMapKey]uintptr{}
	}
	host := unsafe.Pointer(&b.tmaps.scratch[(64-uintptr(unsafe.Pointer(&b.tmaps.scratch[0]))%64)%64])
	dims := [2]uint64{uint64(cols), uint64(rows)}
	strides := [1]uint64{uint64(cols) * 2}
	boxDim := [2]uint32{64, uint32(box)}
	elem := [2]uint32{1, 1}
	r, _, _ := purego.SyscallN(b.d.TensorMapEncodeTiled, uintptr(host), tmapBF16, 2, ptr,
		uintptr(unsafe.Pointer(&dims[0])), uintptr(unsafe.Pointer(&strides[0])), uintptr(unsafe.Pointer(&boxDim[0])),
		uintptr(unsafe.Pointer(&elem[0])), 0, tmapSwizzle128B, tmapL2Promo256B, 0)
	if r != 0 {
		return 0
	}
	dst := b.tmaps.buf.ptr + uintptr(b.tmaps.used*tensorMapBytes)
	if err := b.d.Call("cuMemcpyHtoD", b.d.MemcpyHtoD, dst, uintptr(host), tensorMapBytes); err != nil {
		return 0
	}
	b.tmaps.used++
	b.tmaps.at[k] = dst
	return dst
}
