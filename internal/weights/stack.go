package weights

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// StackLinear assembles the per-expert matrices modules[e] (each logically
// [out, in]) into one stacked [len(modules), out, in] weight, the layout
// the MoE op takes. HF checkpoints store every expert as its own tensor
// (mlp.experts.E.gate_proj), while MLX ones already ship them stacked
// (mlp.switch_mlp.gate_proj); stacking at load lets one op serve both.
//
// Dense experts keep their stored dtype when all agree (so a bf16
// checkpoint stays half the size until the backend converts it) and are
// widened to F32 otherwise. Quantized experts must share bits, group size
// and scale dtype; their packed words, scales and biases are concatenated
// in expert order, which is exactly MLX's stacked layout. A mix of dense
// and quantized experts is an error.
//
// The result owns freshly allocated memory (the checkpoint is mapped
// read-only and the experts are not contiguous in it); it lives only until
// the backend has copied it, so peak load memory grows by one layer's
// experts.
func (c *Checkpoint) StackLinear(modules []string, out, in int) (*tensor.Host, error) {
	if len(modules) == 0 {
		return nil, fmt.Errorf("stack: no expert tensors given")
	}
	parts := make([]*tensor.Host, len(modules))
	for e, m := range modules {
		h, err := c.Linear(m, out, in)
		if err != nil {
			return nil, err
		}
		parts[e] = h
	}
	shape := []int{len(modules), out, in}
	name := fmt.Sprintf("%s (+%d stacked experts)", parts[0].Name, len(modules)-1)
	first := parts[0]
	if first.Quant == nil {
		return stackDense(parts, shape, name)
	}
	q := first.Quant
	var data, scales, biases []byte
	for e, p := range parts {
		if p.Quant == nil {
			return nil, fmt.Errorf("stack: %s is dense but %s is quantized", p.Name, first.Name)
		}
		pq := p.Quant
		if pq.Bits != q.Bits || pq.GroupSize != q.GroupSize || pq.ScaleDType != q.ScaleDType {
			return nil, fmt.Errorf("stack: expert %d (%s) is %d-bit group %d %s, expert 0 is %d-bit group %d %s",
				e, p.Name, pq.Bits, pq.GroupSize, pq.ScaleDType, q.Bits, q.GroupSize, q.ScaleDType)
		}
		data = append(data, p.Data...)
		scales = append(scales, pq.Scales...)
		biases = append(biases, pq.Biases...)
	}
	return &tensor.Host{Name: name, Shape: shape, DType: tensor.U32, Data: data,
		Quant: &tensor.Quant{Bits: q.Bits, GroupSize: q.GroupSize, Scales: scales, Biases: biases, ScaleDType: q.ScaleDType}}, nil
}

func stackDense(parts []*tensor.Host, shape []int, name string) (*tensor.Host, error) {
	dt := parts[0].DType
	for _, p := range parts {
		if p.Quant != nil {
			return nil, fmt.Errorf("stack: %s is quantized but %s is dense", p.Name, parts[0].Name)
		}
		if p.DType != dt {
			dt = tensor.F32
		}
	}
	if dt == tensor.F64 {
		// Backends take any float dtype, but F64 experts would double
		// the transient buffer for no precision the f32 compute keeps.
		dt = tensor.F32
	}
	per := shape[1] * shape[2]
	data := make([]byte, 0, len(parts)*per*dt.Size())
	for _, p := range parts {
		if p.DType == dt {
			data = append(data, p.Data...)
			continue
		}
		f := make([]float32, per)
		if err := tensor.ToFloat32(f, p.Data, p.DType); err != nil {
			return nil, fmt.Errorf("stack: %s: %v", p.Name, err)
		}
		for _, v := range f {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
	}
	return &tensor.Host{Name: name, Shape: shape, DType: dt, Data: data}, nil
}
