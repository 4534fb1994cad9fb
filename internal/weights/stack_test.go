package weights

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// HF per-expert Mixtral tensors stack byte-for-byte in expert order.
func TestStackLinearFixture(t *testing.T) {
	dir := testdata + "tiny/mixtral-bf16"
	ck, err := Open(dir, QuantConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var mods []string
	for e := range 4 {
		mods = append(mods, fmt.Sprintf("model.layers.1.block_sparse_moe.experts.%d.w2", e))
	}
	h, err := ck.StackLinear(mods, 64, 128)
	if err != nil {
		t.Fatal(err)
	}
	if h.DType != tensor.BF16 || h.Quant != nil || fmt.Sprint(h.Shape) != "[4 64 128]" {
		t.Fatalf("stacked: %s %v", h.DType, h.Shape)
	}
	per := 64 * 128 * 2
	for e, m := range mods {
		one, _ := ck.Dense(m+".weight", 64, 128)
		if !bytes.Equal(h.Data[e*per:(e+1)*per], one.Data) {
			t.Fatalf("expert %d not at its slot", e)
		}
	}
	if _, err := ck.StackLinear(mods, 128, 64); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Fatalf("wrong shape accepted: %v", err)
	}
}

func TestStackLinearSynthetic(t *testing.T) {
	d := t.TempDir()
	f32 := func(v ...float32) []byte {
		var b []byte
		for _, x := range v {
			b = appendLE32(b, math.Float32bits(x))
		}
		return b
	}
	// e0 is F32 [1 2], e1 BF16 [1 2]: mixed dtypes widen to F32.
	data := f32(1, 2)
	data = append(data, 0x80, 0x3f, 0x40, 0x40) // bf16 1.0, 3.0
	// q0, q1: 4-bit [2, 64] (8 words a row) with bf16 scales/biases [2, 1];
	// q2 is 8-bit.
	off := len(data)
	hdr := map[string]any{
		"e0.weight": map[string]any{"dtype": "F32", "shape": []int{1, 2}, "data_offsets": []int{0, 8}},
		"e1.weight": map[string]any{"dtype": "BF16", "shape": []int{1, 2}, "data_offsets": []int{8, 12}},
	}
	add := func(name, dt string, shape []int, fill byte, n int) {
		hdr[name] = map[string]any{"dtype": dt, "shape": shape, "data_offsets": []int{off, off + n}}
		data = append(data, bytes.Repeat([]byte{fill}, n)...)
		off += n
	}
	for i, bits := range []int{4, 4, 8} {
		words := 64 * bits / 32
		add(fmt.Sprintf("q%d.weight", i), "U32", []int{2, words}, byte(0x10+i), 2*words*4)
		add(fmt.Sprintf("q%d.scales", i), "BF16", []int{2, 1}, byte(0x20+i), 4)
		add(fmt.Sprintf("q%d.biases", i), "BF16", []int{2, 1}, byte(0x30+i), 4)
	}
	add("d.weight", "F32", []int{2, 64}, 0, 2*64*4)
	writeST(t, filepath.Join(d, "model.safetensors"), hdr, data)
	ck, err := Open(d, QuantConfig{Default: &QuantSpec{Bits: 4, GroupSize: 64}, Overrides: map[string]*QuantSpec{"q2": {Bits: 8, GroupSize: 64}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()

	h, err := ck.StackLinear([]string{"e0", "e1"}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 4)
	if h.DType != tensor.F32 || tensor.ToFloat32(got, h.Data, h.DType) != nil || fmt.Sprint(got) != "[1 2 1 3]" {
		t.Fatalf("mixed dense: %s %v", h.DType, got)
	}

	h, err = ck.StackLinear([]string{"q0", "q1"}, 2, 64)
	if err != nil {
		t.Fatal(err)
	}
	q := h.Quant
	if q == nil || q.Bits != 4 || q.GroupSize != 64 || len(h.Data) != 128 || len(q.Scales) != 8 || len(q.Biases) != 8 ||
		h.Data[0] != 0x10 || h.Data[64] != 0x11 || q.Scales[4] != 0x21 || q.Biases[0] != 0x30 {
		t.Fatalf("quantized stack: %+v", h)
	}
	if _, err := ck.StackLinear([]string{"q0", "q2"}, 2, 64); err == nil || !strings.Contains(err.Error(), "8-bit") {
		t.Fatalf("mixed bits accepted: %v", err)
	}
	if _, err := ck.StackLinear([]string{"q0", "d"}, 2, 64); err == nil {
		t.Fatal("dense+quantized accepted")
	}
}

func appendLE32(b []byte, u uint32) []byte {
	return append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
}
