package weights

import (
	"bytes"
	"testing"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

func TestSplitColumnsAndRowBlocks(t *testing.T) {
	// A bf16 [2, 4]: 8 bytes a row, numbered so each byte's origin shows.
	h := &tensor.Host{Name: "w", Shape: []int{2, 4}, DType: tensor.BF16, Data: []byte{
		0, 1, 2, 3, 4, 5, 6, 7,
		8, 9, 10, 11, 12, 13, 14, 15}}
	cols, err := SplitColumns(h, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cols[0].Data, []byte{0, 1, 2, 3, 8, 9, 10, 11}) || !bytes.Equal(cols[1].Data, []byte{4, 5, 6, 7, 12, 13, 14, 15}) {
		t.Errorf("column blocks %v %v", cols[0].Data, cols[1].Data)
	}
	if cols[1].Shape[0] != 2 || cols[1].Shape[1] != 2 {
		t.Errorf("column block shape %v", cols[1].Shape)
	}
	rows, err := SplitRowBlocks(h, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rows[1].Data, h.Data[8:]) || rows[1].Shape[0] != 1 || rows[1].Shape[1] != 4 {
		t.Errorf("row block %v %v", rows[1].Data, rows[1].Shape)
	}
	// Quantized: 4-bit, group 64; blocks of 64 columns cut words and
	// scales alike, blocks of 32 would split a group.
	q := &tensor.Host{Name: "q", Shape: []int{1, 128}, Data: make([]byte, 64),
		Quant: &tensor.Quant{Bits: 4, GroupSize: 64, Scales: []byte{1, 2, 3, 4}, Biases: []byte{5, 6, 7, 8}, ScaleDType: tensor.BF16}}
	for i := range q.Data {
		q.Data[i] = byte(i)
	}
	qc, err := SplitColumns(q, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(qc[1].Data, q.Data[32:]) || !bytes.Equal(qc[1].Quant.Scales, []byte{3, 4}) || !bytes.Equal(qc[1].Quant.Biases, []byte{7, 8}) {
		t.Errorf("quantized column block %v %v %v", qc[1].Data, qc[1].Quant.Scales, qc[1].Quant.Biases)
	}
	if _, err := SplitColumns(q, 4); err == nil {
		t.Error("blocks of 32 columns split groups of 64 without an error")
	}
}
