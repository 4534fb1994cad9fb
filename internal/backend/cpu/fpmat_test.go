package cpu

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// A mode the backend does not know, or fp data of the wrong size, is
// refused at upload naming the tensor, never read as affine.
func TestUploadFPRefusals(t *testing.T) {
	be := New(1)
	for _, c := range []struct {
		q    tensor.Quant
		data int
		want string
	}{
		{tensor.Quant{Bits: 4, GroupSize: 32, Mode: "fp6", Scales: make([]byte, 2), Biases: make([]byte, 4), ScaleDType: tensor.BF16}, 2 * 32 / 2, "fp6"},
		{tensor.Quant{Bits: 4, GroupSize: 32, Mode: "mxfp4", Scales: make([]byte, 2), ScaleDType: tensor.BF16}, 2 * 32 / 2, "uint8 scales"},
		{tensor.Quant{Bits: 4, GroupSize: 32, Mode: "mxfp4", Scales: make([]byte, 1), ScaleDType: tensor.U8}, 2 * 32 / 2, "sizes"},
	} {
		q := c.q
		_, err := be.UploadWeight(&tensor.Host{Name: "m.weight", Shape: []int{2, 32}, DType: tensor.U32, Data: make([]byte, c.data), Quant: &q})
		if err == nil || !strings.Contains(err.Error(), "m.weight") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming m.weight and %q", q.Mode, err, c.want)
		}
	}
}
