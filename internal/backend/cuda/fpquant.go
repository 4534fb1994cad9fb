//go:build linux

package cuda

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// MLX's floating-point quantization modes (package quant): E2M1 or E4M3
// codes packed as the affine 4- and 8-bit words are, one uint8 scale a
// group (E8M0 for mxfp4/mxfp8, E4M3 for nvfp4), no biases. The codes are
// kept as stored; each scale is decoded here into the SBfp form the
// kernels read (kernels/common.cu): a u32 a group whose low half is the
// scale in bf16, multiplied by fpScaleShift's power of two, which undoes
// the scaling of the kernels' f16 code values (fp_h16). Every decoded
// scale is exact in bf16 (E8M0 is a power of two, E4M3 has 3 mantissa
// bits). The u32 costs 3 bytes a group more than the byte (for mxfp4 20
// bytes a 32-weight group instead of 17) but keeps the affine kernels'
// scale indexing, so the GEMV, MoE and dequantization kernels serve both.
// nvfp4 rows of whole pairs of groups put two scales in a word (SBfp2,
// setFP): 10 bytes a 16-weight group instead of 9.

// fpScaleShift is the power of two a decoded scale is multiplied by: the
// inverse of fp_h16's 2^-14 (E2M1) or 2^-8 (E4M3).
func fpScaleShift(bits int) int {
	if bits == 4 {
		return 14
	}
	return 8
}

// uploadFP uploads a floating-point quantized weight.
func (b *Backend) uploadFP(w *weight, h *tensor.Host) error {
	q := h.Quant
	bits, group, _ := quant.FPParams(q.Mode)
	rows, ng := w.experts*w.out, w.in/max(group, 1)
	if err := quant.CheckFPShapes(q.Mode, w.out, w.in, len(h.Data)/max(rows, 1), len(q.Scales)/max(rows, 1)); err != nil {
		return fmt.Errorf("%s: %v", h.Name, err)
	}
	if q.ScaleDType != tensor.U8 || len(q.Biases) != 0 || len(h.Data) != rows*w.in*bits/8 || len(q.Scales) != rows*ng {
		return fmt.Errorf("%s: %s weight of shape %v needs %d code bytes and %d uint8 scales and no biases, have %d, %d %s, %d biases",
			h.Name, q.Mode, h.Shape, rows*w.in*bits/8, rows*ng, len(h.Data), len(q.Scales), q.ScaleDType, len(q.Biases))
	}
	w.setFP(q.Mode)
	sb, err := fpScales(q.Mode, bits, q.Scales, w.fpPair)
	if err != nil {
		return fmt.Errorf("%s: %v", h.Name, err)
	}
	return b.uploadPacked(w, h.Name, h.Data, sb)
}

// setFP sets w's quantization fields for mode. nvfp4 rows of whole pairs
// of groups keep both scales of a pair in one word (SBfp2), indexed as a
// group of 32, so the 16-byte chunk kernels take them; other nvfp4 rows
// keep a word a group.
func (w *weight) setFP(mode string) {
	bits, group, _ := quant.FPParams(mode)
	w.quant, w.fp, w.bits, w.group = true, true, bits, group
	w.fpPair = group == 16 && w.in%32 == 0
	if w.fpPair {
		w.group = 32
	}
	w.gshft = 0
	for 1<<w.gshft < w.group {
		w.gshft++
	}
}

// fpScales decodes scale bytes into SBfp words (little-endian u32, bf16
// scale in the low half), or with pair into SBfp2 words (scales 2i and
// 2i+1 in the low and high halves of word i: a row's pairs, since its
// group count is even). A scale whose scaled value bf16 cannot hold
// (E8M0 bytes above 240 for 4 bits, 246 for 8; 255 is NaN) is an error
// rather than a silent infinity.
func fpScales(mode string, bits int, scales []byte, pair bool) ([]byte, error) {
	lut := [256]uint32{}
	bad := [256]bool{}
	for c := range 256 {
		f := float64(quant.FPScale(mode, uint8(c))) * math.Ldexp(1, fpScaleShift(bits))
		v := math.Float32bits(float32(f))
		bad[c] = math.IsNaN(f) || math.IsInf(float64(float32(f)), 0) || v&0xffff != 0
		lut[c] = v >> 16
	}
	per := 4 // bytes a scale takes: a word, or half of one (pair)
	if pair {
		per = 2
	}
	sb := make([]byte, (per*len(scales)+3)/4*4)
	for i, c := range scales {
		if bad[c] {
			return nil, fmt.Errorf("%s scale byte 0x%02x (group %d) is outside what the CUDA kernels hold (%g)", mode, c, i, quant.FPScale(mode, c))
		}
		u := lut[c]
		sb[per*i], sb[per*i+1] = byte(u), byte(u>>8)
	}
	return sb, nil
}
