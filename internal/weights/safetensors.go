// Package weights reads checkpoints: safetensors files (memory-mapped,
// single or sharded), config.json and MLX quantization metadata.
package weights

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// TensorInfo is one entry of a safetensors header.
type TensorInfo struct {
	Name  string
	DType tensor.DType
	Shape []int
	Begin int64 // offsets relative to the start of the data section
	End   int64
}

// Elements is the product of the shape (1 for a scalar).
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// maxHeader bounds the JSON header so a corrupt length cannot make us
// allocate gigabytes (the format's own limit is 100 MB).
const maxHeader = 100 << 20

// ParseHeader validates a safetensors file image's header against the
// file size and returns its tensors sorted by offset. It never panics on
// malformed input.
func ParseHeader(file []byte) (infos []TensorInfo, dataStart int64, meta map[string]string, err error) {
	if len(file) < 8 {
		return nil, 0, nil, fmt.Errorf("file too short for a safetensors header (%d bytes)", len(file))
	}
	n := uint64(file[0]) | uint64(file[1])<<8 | uint64(file[2])<<16 | uint64(file[3])<<24 |
		uint64(file[4])<<32 | uint64(file[5])<<40 | uint64(file[6])<<48 | uint64(file[7])<<56
	if n > maxHeader || n > uint64(len(file)-8) {
		return nil, 0, nil, fmt.Errorf("header length %d exceeds file size %d (truncated or not safetensors)", n, len(file))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(file[8:8+n], &raw); err != nil {
		return nil, 0, nil, fmt.Errorf("header is not valid JSON: %v", err)
	}
	dataStart = int64(8 + n)
	dataLen := int64(len(file)) - dataStart
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &meta); err != nil {
				return nil, 0, nil, fmt.Errorf("__metadata__: %v", err)
			}
			continue
		}
		var e struct {
			DType   string  `json:"dtype"`
			Shape   []int64 `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, 0, nil, fmt.Errorf("tensor %s: bad header entry: %v", name, err)
		}
		dt, err := tensor.ParseDType(e.DType)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("tensor %s: %v", name, err)
		}
		if len(e.Offsets) != 2 {
			return nil, 0, nil, fmt.Errorf("tensor %s: data_offsets must have 2 entries", name)
		}
		info := TensorInfo{Name: name, DType: dt, Begin: e.Offsets[0], End: e.Offsets[1]}
		elems := int64(1)
		for _, d := range e.Shape {
			if d < 0 || d > math.MaxInt32 || (d > 0 && elems > math.MaxInt64/d/8) {
				return nil, 0, nil, fmt.Errorf("tensor %s: invalid shape %v", name, e.Shape)
			}
			elems *= d
			info.Shape = append(info.Shape, int(d))
		}
		if info.Begin < 0 || info.End < info.Begin || info.End > dataLen {
			return nil, 0, nil, fmt.Errorf("tensor %s: data_offsets [%d,%d] outside the %d-byte data section (truncated file?)",
				name, info.Begin, info.End, dataLen)
		}
		if want := elems * int64(dt.Size()); info.End-info.Begin != want {
			return nil, 0, nil, fmt.Errorf("tensor %s: %s%v needs %d bytes, offsets give %d",
				name, dt, info.Shape, want, info.End-info.Begin)
		}
		infos = append(infos, info)
	}
	sort.Slice(infos, func(i, j int) bool {
		if infos[i].Begin != infos[j].Begin {
			return infos[i].Begin < infos[j].Begin
		}
		return infos[i].Name < infos[j].Name
	})
	for i := 1; i < len(infos); i++ {
		if infos[i].Begin < infos[i-1].End {
			return nil, 0, nil, fmt.Errorf("tensors %s and %s overlap", infos[i-1].Name, infos[i].Name)
		}
	}
	return infos, dataStart, meta, nil
}

// File is one memory-mapped safetensors file.
type File struct {
	Path    string
	Meta    map[string]string
	Tensors map[string]TensorInfo
	data    []byte // the whole mapped file
	start   int64
	unmap   func() error

	mu   sync.Mutex
	read map[string]bool // tensors whose bytes were handed out (Checkpoint.Unused)
}

// OpenFile maps path and validates its header.
func OpenFile(path string) (*File, error) {
	if err := RegularFile(path); err != nil {
		return nil, err
	}
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	infos, start, meta, err := ParseHeader(data)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	f := &File{Path: path, Meta: meta, Tensors: map[string]TensorInfo{}, data: data, start: start, unmap: unmap, read: map[string]bool{}}
	for _, t := range infos {
		f.Tensors[t.Name] = t
	}
	return f, nil
}

// Bytes returns the raw bytes of a tensor (a view of the mapping) and
// records that the tensor was read.
func (f *File) Bytes(t TensorInfo) []byte {
	f.mu.Lock()
	if f.read != nil {
		f.read[t.Name] = true
	}
	f.mu.Unlock()
	return f.data[f.start+t.Begin : f.start+t.End]
}

// wasRead reports whether Bytes handed out the tensor named name.
func (f *File) wasRead(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.read[name]
}

// Close unmaps the file; byte views become invalid.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap = nil
	return err
}

// RegularFile fails for anything but a regular file (symlinks followed):
// opening a named pipe blocks until a writer comes, which would leave a
// server loading for ever; a device could be read without end.
func RegularFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s: %v", path, err)
	}
	if m := st.Mode(); !m.IsRegular() {
		kind := "not a regular file"
		switch {
		case m&os.ModeNamedPipe != 0:
			kind = "a named pipe, not a regular file"
		case m.IsDir():
			kind = "a directory, not a file"
		case m&(os.ModeDevice|os.ModeCharDevice) != 0:
			kind = "a device, not a regular file"
		case m&os.ModeSocket != 0:
			kind = "a socket, not a regular file"
		}
		return fmt.Errorf("%s: %s", path, kind)
	}
	return nil
}

// CheckModelFiles runs RegularFile over the files of a model directory
// that loaders read (weights, JSON configs, templates, tokenizer models),
// so a broken directory fails at once with the file's name.
func CheckModelFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".safetensors", ".json", ".jinja", ".model", ".txt":
			if err := RegularFile(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func readWhole(path string) ([]byte, func() error, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
