package weights

import (
	"fmt"
	"path/filepath"

	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// MLX's floating-point quantization modes (package quant): a module is in
// one when its config entry says so, or, with no entry, when it has uint8
// .scales and no .biases (mlx-lm always writes the mode, but a predicate
// may leave a module out of the config). Bits and group follow from the
// mode; the group may also be inferred from the scales' shape.

func (c *Checkpoint) isFP(module string, spec QuantSpec) bool {
	if spec.Mode != "" {
		return quant.IsFP(spec.Mode)
	}
	e, ok := c.entries[module+".scales"]
	return ok && e.info.DType == tensor.U8 && !c.Has(module+".biases")
}

// fpLinear returns module's fp-quantized weight of logical shape shape
// ([out, in] or [experts, out, in]).
func (c *Checkpoint) fpLinear(module string, spec QuantSpec, shape []int) (*tensor.Host, error) {
	wname, sname := module+".weight", module+".scales"
	we, se := c.entries[wname], c.entries[sname]
	file := filepath.Base(we.file.Path)
	in := shape[len(shape)-1]
	lead := shape[:len(shape)-1]
	if we.info.DType != tensor.U32 {
		return nil, fmt.Errorf("%s: tensor %s has dtype %s, quantized weights must be U32", file, wname, we.info.DType)
	}
	if se.info.DType != tensor.U8 {
		return nil, fmt.Errorf("%s: tensor %s has dtype %s, %s scales must be U8", filepath.Base(se.file.Path), sname, se.info.DType, spec.Mode)
	}
	if c.Has(module + ".biases") {
		return nil, fmt.Errorf("%s: tensor %s.biases present, but floating-point quantization has no biases", file, module)
	}
	ws, ss := we.info.Shape, se.info.Shape
	if len(ws) != len(shape) || !sameShape(ws[:len(lead)], lead) || len(ss) != len(shape) || !sameShape(ss[:len(lead)], lead) {
		return nil, fmt.Errorf("%s: tensor %s has shape %v (scales %v), want %v x packed", file, wname, ws, ss, lead)
	}
	mode := spec.Mode
	if mode == "" {
		mode = inferFPMode(ws[len(lead)]*32/in, in/max(ss[len(lead)], 1))
	}
	if err := quant.CheckFPShapes(mode, 1, in, 4*ws[len(lead)], ss[len(lead)]); err != nil {
		return nil, fmt.Errorf("%s: tensor %s: %v", file, wname, err)
	}
	return fpHost(wname, shape, mode, we.file.Bytes(we.info), se.file.Bytes(se.info)), nil
}

// inferFPMode names the mode of a weight the config is silent about.
func inferFPMode(bits, group int) string {
	switch {
	case bits == 8:
		return quant.MXFP8
	case group == 16:
		return quant.NVFP4
	}
	return quant.MXFP4
}

func fpHost(name string, shape []int, mode string, packed, scales []byte) *tensor.Host {
	bits, group, _ := quant.FPParams(mode)
	return &tensor.Host{Name: name, Shape: shape, DType: tensor.U32, Data: packed,
		Quant: &tensor.Quant{Bits: bits, GroupSize: group, Scales: scales, ScaleDType: tensor.U8, Mode: mode}}
}

// MXFP4Blocks reads openai's MXFP4 layout (gpt-oss checkpoints,
// quant_method mxfp4): name+"_blocks" uint8 [.., out, in/32, 16] and
// name+"_scales" uint8 [.., out, in/32], for a weight of logical shape
// [.., out, in]. The blocks are MLX's mxfp4 bytes already.
func (c *Checkpoint) MXFP4Blocks(name string, shape ...int) (*tensor.Host, error) {
	bname, sname := name+"_blocks", name+"_scales"
	be, ok := c.entries[bname]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %s is missing", c.where(bname), bname)
	}
	se, ok := c.entries[sname]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %s is missing (have %s)", c.where(sname), sname, bname)
	}
	file := filepath.Base(be.file.Path)
	in := shape[len(shape)-1]
	lead := shape[:len(shape)-1]
	if in%32 != 0 {
		return nil, fmt.Errorf("%s: tensor %s: %d inputs are not whole MXFP4 blocks of 32", file, bname, in)
	}
	wantB := append(append([]int(nil), lead...), in/32, 16)
	wantS := append(append([]int(nil), lead...), in/32)
	if be.info.DType != tensor.U8 || !sameShape(be.info.Shape, wantB) {
		return nil, fmt.Errorf("%s: tensor %s is %s %v, want U8 %v", file, bname, be.info.DType, be.info.Shape, wantB)
	}
	if se.info.DType != tensor.U8 || !sameShape(se.info.Shape, wantS) {
		return nil, fmt.Errorf("%s: tensor %s is %s %v, want U8 %v", filepath.Base(se.file.Path), sname, se.info.DType, se.info.Shape, wantS)
	}
	return fpHost(bname, shape, quant.MXFP4, be.file.Bytes(be.info), se.file.Bytes(se.info)), nil
}

// SplitRows returns rows parity, parity+2, ... of the second-to-last
// axis of a [E, R, in] weight (dense or quantized) as a new [E, R/2, in]
// host: gpt-oss interleaves its gate and up projections row by row.
func SplitRows(h *tensor.Host, parity int) (*tensor.Host, error) {
	return pickRows(h, func(o, r int) bool { return o%2 == parity })
}

// SplitHalves returns the first (half 0) or second (half 1) half of the
// rows of a [E, R, in] weight as [E, R/2, in]: Gemma 4's gate_up_proj
// holds each expert's gate rows, then its up rows.
func SplitHalves(h *tensor.Host, half int) (*tensor.Host, error) {
	return pickRows(h, func(o, r int) bool { return o/(r/2) == half })
}

// pickRows keeps the rows o of each expert's R rows for which keep(o, R).
func pickRows(h *tensor.Host, keep func(o, r int) bool) (*tensor.Host, error) {
	if len(h.Shape) != 3 || h.Shape[1]%2 != 0 {
		return nil, fmt.Errorf("%s: shape %v is not [experts, even rows, in]", h.Name, h.Shape)
	}
	e, r := h.Shape[0], h.Shape[1]
	pick := func(b []byte) []byte {
		rb := len(b) / (e * r)
		out := make([]byte, 0, len(b)/2)
		for x := range e {
			for o := range r {
				if keep(o, r) {
					i := (x*r + o) * rb
					out = append(out, b[i:i+rb]...)
				}
			}
		}
		return out
	}
	out := &tensor.Host{Name: h.Name, Shape: []int{e, r / 2, h.Shape[2]}, DType: h.DType, Data: pick(h.Data)}
	if q := h.Quant; q != nil {
		nq := *q
		nq.Scales = pick(q.Scales)
		if q.Biases != nil {
			nq.Biases = pick(q.Biases)
		}
		out.Quant = &nq
	}
	return out, nil
}

// TransposeExperts turns a dense [E, A, B] tensor into [E, B, A] (gpt-oss's
// HF experts are stored [experts, in, out]).
func TransposeExperts(h *tensor.Host) (*tensor.Host, error) {
	if len(h.Shape) != 3 || h.Quant != nil {
		return nil, fmt.Errorf("%s: shape %v is not a dense [experts, in, out] tensor", h.Name, h.Shape)
	}
	e, a, b := h.Shape[0], h.Shape[1], h.Shape[2]
	es := h.DType.Size()
	if len(h.Data) != e*a*b*es {
		return nil, fmt.Errorf("%s: %d bytes for shape %v", h.Name, len(h.Data), h.Shape)
	}
	out := make([]byte, len(h.Data))
	for x := range e {
		for i := range a {
			for j := range b {
				src := ((x*a+i)*b + j) * es
				dst := ((x*b+j)*a + i) * es
				copy(out[dst:dst+es], h.Data[src:src+es])
			}
		}
	}
	return &tensor.Host{Name: h.Name, Shape: []int{e, b, a}, DType: h.DType, Data: out}, nil
}
