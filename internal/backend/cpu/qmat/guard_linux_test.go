package qmat

import (
	"math/rand"
	"syscall"
	"testing"

	"github.com/mlxcel/mlxcel/internal/tensor"
)

// TestNoReadPastPacked places the packed weights at the very end of a
// mapping followed by an inaccessible page, as a memory-mapped checkpoint
// may be laid out: any kernel load past the last weight byte faults.
func TestNoReadPastPacked(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skip("mmap:", err)
	}
	defer syscall.Munmap(mem)
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Skip("mprotect:", err)
	}
	paths(t, func(t *testing.T) {
		rng := rand.New(rand.NewSource(7))
		for _, bits := range []int{2, 3, 4, 5, 6, 8} {
			out, in := 5, 256
			f := newFixture(t, rng, out, in, bits, 64, tensor.BF16)
			n := len(f.m.packed)
			guarded := mem[page-n : page]
			copy(guarded, f.m.packed)
			m, err := New(out, in, bits, 64, guarded, bf16Bytes(f, true), bf16Bytes(f, false), tensor.BF16)
			if err != nil {
				t.Fatal(err)
			}
			for _, nRows := range []int{1, 3, 16} {
				x := randX(rng, nRows*in)
				res := make([]float32, nRows*out)
				m.Mul(res, x, nRows, 1)
				checkMul(t, fixture{m, f.w}, x, res, nRows, 0, out, "guarded")
			}
		}
	})
}

// bf16Bytes extracts the stored scales (or biases) of a BF16 fixture.
func bf16Bytes(f fixture, scales bool) []byte {
	m := f.m
	b := make([]byte, 0, m.Out*m.groups*2)
	for o := 0; o < m.Out; o++ {
		row := m.meta[o*m.metaStride:]
		if !scales {
			row = row[m.gpad*2:]
		}
		b = append(b, row[:m.groups*2]...)
	}
	return b
}
