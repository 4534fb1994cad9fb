package model_test

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/mlxcel/mlxcel/internal/tensor"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// stTensor is one tensor of a checkpoint rewritten by a test.
type stTensor struct {
	DType tensor.DType
	Shape []int
	Data  []byte
}

// readTensors reads every tensor of a safetensors file.
func readTensors(t *testing.T, path string) map[string]stTensor {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	infos, start, _, err := weights.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]stTensor{}
	for _, ti := range infos {
		out[ti.Name] = stTensor{ti.DType, ti.Shape, b[start+ti.Begin : start+ti.End]}
	}
	return out
}

// writeTensors writes a safetensors file (metadata format=pt).
func writeTensors(t *testing.T, path string, ts map[string]stTensor) {
	t.Helper()
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, n := range names {
		x := ts[n]
		hdr[n] = map[string]any{"dtype": x.DType.String(), "shape": x.Shape, "data_offsets": []int{len(data), len(data) + len(x.Data)}}
		data = append(data, x.Data...)
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// rewriteFixture copies dir's config.json (through editConfig) and its
// tensors (through edit, which may rename, add or drop entries) to a temp
// dir as model.safetensors.
func rewriteFixture(t *testing.T, dir string, editConfig func(map[string]any), edit func(map[string]stTensor)) string {
	t.Helper()
	out := copyFixture(t, dir, editConfig, nil)
	ts := readTensors(t, filepath.Join(dir, "model.safetensors"))
	if edit != nil {
		edit(ts)
	}
	writeTensors(t, filepath.Join(out, "model.safetensors"), ts)
	return out
}

// bf16Const is a bf16 tensor of shape filled with v.
func bf16Const(v float32, shape ...int) stTensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	b := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(b[2*i:], tensor.F32ToBF16(v))
	}
	return stTensor{tensor.BF16, shape, b}
}
