// Package tensor holds the element types mlxcel reads from checkpoints and
// the scalar conversions between them. It knows nothing about devices.
package tensor

import (
	"fmt"
	"math"
)

// DType is the element type of a stored tensor.
type DType int

const (
	Invalid DType = iota
	F32
	F16
	BF16
	U32
	I32
	I64
	U8
	I8
	U16
	I16
	U64
	F64
	Bool
)

var dtypeNames = map[DType]string{
	F32: "F32", F16: "F16", BF16: "BF16", U32: "U32", I32: "I32", I64: "I64",
	U8: "U8", I8: "I8", U16: "U16", I16: "I16", U64: "U64", F64: "F64", Bool: "BOOL",
}

var dtypeSizes = map[DType]int{
	F32: 4, F16: 2, BF16: 2, U32: 4, I32: 4, I64: 8, U8: 1, I8: 1, U16: 2, I16: 2, U64: 8, F64: 8, Bool: 1,
}

func (d DType) String() string {
	if s, ok := dtypeNames[d]; ok {
		return s
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size is the number of bytes of one element (0 for Invalid).
func (d DType) Size() int { return dtypeSizes[d] }

// IsFloat reports whether values of this type convert to float32 directly.
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 || d == F64 }

// ParseDType maps a safetensors dtype string ("BF16", "F32", ...) to a DType.
func ParseDType(s string) (DType, error) {
	for d, n := range dtypeNames {
		if n == s {
			return d, nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q", s)
}

// BF16ToF32 widens a bfloat16 bit pattern.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds to nearest even, keeping NaN a NaN.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// F16ToF32 widens an IEEE half bit pattern, subnormals included.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToF16 rounds to nearest even.
func F32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23&0xff) - 127 + 15
	mant := u & 0x7fffff
	if u&0x7fffffff > 0x7f800000 {
		return sign | 0x7e00
	}
	if exp >= 0x1f {
		return sign | 0x7c00
	}
	if exp <= 0 {
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

// ToFloat32 decodes little-endian raw bytes of a float dtype into dst.
// len(dst) elements are read from raw.
func ToFloat32(dst []float32, raw []byte, d DType) error {
	n := len(dst)
	if len(raw) < n*d.Size() {
		return fmt.Errorf("need %d bytes of %s, have %d", n*d.Size(), d, len(raw))
	}
	switch d {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(le32(raw[4*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
		}
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(uint64(le32(raw[8*i:])) | uint64(le32(raw[8*i+4:]))<<32))
		}
	default:
		return fmt.Errorf("dtype %s is not a float type", d)
	}
	return nil
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
