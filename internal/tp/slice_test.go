package tp

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// seq is n bytes counting up, so a wrong cut shows as wrong values.
func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestSliceDenseRowsAndCols(t *testing.T) {
	// [4, 3] of f32-sized elements: 12 bytes a row.
	h := &tensor.Host{Name: "w", Shape: []int{4, 3}, DType: tensor.F32, Data: seq(48)}
	rows := &Tensor{Name: "w", Shape: []int{4, 3}, Axis: Rows, Ranges: [][2]int{{0, 2}, {2, 4}}}
	s, err := Slice(h, rows, 1)
	if err != nil || !bytes.Equal(s.Data, seq(48)[24:]) || s.Shape[0] != 2 {
		t.Fatalf("rows: %v %v %v", err, s.Shape, s.Data)
	}
	cols := &Tensor{Name: "w", Shape: []int{4, 3}, Axis: Cols, Ranges: [][2]int{{0, 1}, {1, 3}}}
	s, err = Slice(h, cols, 1)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for r := range 4 {
		want = append(want, seq(48)[r*12+4:r*12+12]...)
	}
	if !bytes.Equal(s.Data, want) || s.Shape[1] != 2 {
		t.Fatalf("cols: %v %v", s.Shape, s.Data)
	}
}

// A row cut of several pieces (Qwen3.5's q|k|v channels) concatenates
// them in order, scales with the packed words.
func TestSlicePieces(t *testing.T) {
	// [6, 8] 4-bit: one 32-bit word and one group of 8 a row.
	h := &tensor.Host{Name: "w", Shape: []int{6, 8}, DType: tensor.U32, Data: seq(24),
		Quant: &tensor.Quant{Bits: 4, GroupSize: 8, Scales: seq(12), Biases: seq(12), ScaleDType: tensor.BF16}}
	p := &Tensor{Name: "w", Shape: []int{6, 8}, Axis: Rows, Pieces: [][][2]int{{{0, 1}, {2, 3}, {4, 5}}, {{1, 2}, {3, 4}, {5, 6}}}}
	s, err := Slice(h, p, 1)
	if err != nil {
		t.Fatal(err)
	}
	w, sc := seq(24), seq(12)
	wantW := append(append(append([]byte(nil), w[4:8]...), w[12:16]...), w[20:24]...)
	wantS := append(append(append([]byte(nil), sc[2:4]...), sc[6:8]...), sc[10:12]...)
	if !bytes.Equal(s.Data, wantW) || !bytes.Equal(s.Quant.Scales, wantS) || s.Shape[0] != 3 {
		t.Fatalf("pieces: %v %v %v", s.Shape, s.Data, s.Quant.Scales)
	}
}

func TestSliceQuantCols(t *testing.T) {
	// [2, 256] 4-bit in groups of 64: 128 bytes of words and 4 bf16
	// scales (8 bytes) a row.
	h := &tensor.Host{Name: "m.weight", Shape: []int{2, 256}, DType: tensor.U32, Data: seq(256),
		Quant: &tensor.Quant{Bits: 4, GroupSize: 64, Scales: seq(16), Biases: seq(16), ScaleDType: tensor.BF16}}
	cols := &Tensor{Name: "m", Shape: []int{2, 256}, Axis: Cols, Ranges: [][2]int{{0, 128}, {128, 256}}}
	s, err := Slice(h, cols, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantData := append(append([]byte{}, seq(256)[64:128]...), seq(256)[192:256]...)
	wantScales := append(append([]byte{}, seq(16)[4:8]...), seq(16)[12:16]...)
	if !bytes.Equal(s.Data, wantData) || !bytes.Equal(s.Quant.Scales, wantScales) || !bytes.Equal(s.Quant.Biases, wantScales) {
		t.Fatalf("quantized cols: data %v scales %v", s.Data, s.Quant.Scales)
	}
	// 96 columns a rank would cut the second group.
	bad := &Tensor{Name: "m", Shape: []int{2, 256}, Axis: Cols, Ranges: [][2]int{{0, 96}, {96, 256}}}
	if _, err := Slice(h, bad, 0); err == nil || !strings.Contains(err.Error(), "m.weight") || !strings.Contains(err.Error(), "groups of 64") {
		t.Fatalf("err %v, want a refusal naming m.weight", err)
	}
}

// TestSliceQuantExperts: stacked quantized experts [4, 2, 128] cut by
// expert take whole experts' words, scales and biases.
func TestSliceQuantExperts(t *testing.T) {
	// 4-bit, groups of 64: 64 bytes of words and 2 bf16 scales (4 bytes)
	// a row, 2 rows an expert.
	h := &tensor.Host{Name: "e.weight", Shape: []int{4, 2, 128}, DType: tensor.U32, Data: seq(512),
		Quant: &tensor.Quant{Bits: 4, GroupSize: 64, Scales: seq(32), Biases: seq(32), ScaleDType: tensor.BF16}}
	ex := &Tensor{Name: "e", Shape: []int{4, 2, 128}, Axis: Rows, Ranges: [][2]int{{0, 2}, {2, 4}}}
	s, err := Slice(h, ex, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Data, seq(512)[256:]) || !bytes.Equal(s.Quant.Scales, seq(32)[16:]) ||
		!bytes.Equal(s.Quant.Biases, seq(32)[16:]) || s.Shape[0] != 2 || s.Shape[2] != 128 {
		t.Fatalf("experts: shape %v data %d bytes scales %v", s.Shape, len(s.Data), s.Quant.Scales)
	}
	// A 3-D tensor cut along its columns is not a split the plan makes.
	cols := &Tensor{Name: "e", Shape: []int{4, 2, 128}, Axis: Cols, Ranges: [][2]int{{0, 1}, {1, 2}}}
	if _, err := Slice(h, cols, 0); err == nil {
		t.Fatal("a 3-D column cut was accepted")
	}
}
