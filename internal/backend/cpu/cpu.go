// Package cpu is the pure-Go backend: the reference every other backend is
// tested against, and a usable engine on machines without a GPU. Work is
// split over a pool of persistent goroutines (one per core by default,
// pool.go); quantized weights stay packed and are read by the kernels in
// qmat; attention and activations have their own AVX2 kernels
// (attn_amd64.s). docs/cpu-backend.md describes the design and its
// measurements.
package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/mlxcel/mlxcel/internal/backend"
)

func init() {
	backend.Register("cpu", func(o backend.Options) (backend.Backend, error) { return New(o.Threads), nil })
}

// Tensor is a row-major float32 matrix; views share d.
type Tensor struct {
	d          []float32
	rows, cols int
}

func (t *Tensor) Rows() int { return t.rows }
func (t *Tensor) Cols() int { return t.cols }

// Row returns row r.
func (t *Tensor) Row(r int) []float32 { return t.d[r*t.cols : (r+1)*t.cols] }

// Data exposes the elements (tests and tools only).
func (t *Tensor) Data() []float32 { return t.d[:t.rows*t.cols] }

// Backend is the CPU implementation of backend.Backend.
type Backend struct {
	threads  int
	step     *backend.Batch
	poolOnce sync.Once
	pool     *pool
}

// New makes a CPU backend using threads goroutines (0: GOMAXPROCS).
func New(threads int) *Backend {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &Backend{threads: threads}
}

func (b *Backend) Name() string { return "cpu" }
func (b *Backend) Sync() error  { return nil }
func (b *Backend) Close() error {
	if b.pool != nil {
		b.pool.close()
	}
	return nil
}

// Supports: the CPU backend runs every backend.Feature (it is the
// reference the conformance suite checks the others against).
func (b *Backend) Supports(backend.Feature) bool { return true }

// workers returns the worker pool, started on first use so that backends
// made only to upload or inspect weights start no goroutines.
func (b *Backend) workers() *pool {
	b.poolOnce.Do(func() { b.pool = newPool(b.threads) })
	return b.pool
}

func (b *Backend) NewTensor(rows, cols int) backend.Tensor {
	return &Tensor{d: make([]float32, rows*cols), rows: rows, cols: cols}
}

func (b *Backend) View(t backend.Tensor, rows, cols int) backend.Tensor {
	x := t.(*Tensor)
	if rows*cols > len(x.d) {
		panic(fmt.Sprintf("cpu: view %dx%d of a %d-element tensor", rows, cols, len(x.d)))
	}
	return &Tensor{d: x.d[:rows*cols], rows: rows, cols: cols}
}

func (b *Backend) Slice(t backend.Tensor, from, to int) backend.Tensor {
	x := t.(*Tensor)
	return &Tensor{d: x.d[from*x.cols : to*x.cols], rows: to - from, cols: x.cols}
}

func (b *Backend) BeginStep(batch *backend.Batch) error {
	if len(batch.Positions) != len(batch.Tokens) {
		return fmt.Errorf("cpu: batch has %d tokens but %d positions", len(batch.Tokens), len(batch.Positions))
	}
	n := 0
	for _, s := range batch.Seqs {
		if s.Start != n || s.Len <= 0 {
			return fmt.Errorf("cpu: batch sequences must cover the tokens in order")
		}
		n += s.Len
	}
	if n != len(batch.Tokens) {
		return fmt.Errorf("cpu: batch sequences cover %d of %d tokens", n, len(batch.Tokens))
	}
	for _, r := range batch.LogitRows {
		if r < 0 || r >= n {
			return fmt.Errorf("cpu: logit row %d outside the %d-token batch", r, n)
		}
	}
	b.step = batch
	return nil
}

// parallel runs f over [0,n) split into at most b.threads contiguous
// chunks of at least minChunk items; small problems run inline.
func (b *Backend) parallel(n, minChunk int, f func(lo, hi int)) {
	chunks := b.threads
	if minChunk < 1 {
		minChunk = 1
	}
	if c := n / minChunk; c < chunks {
		chunks = c
	}
	if chunks <= 1 {
		f(0, n)
		return
	}
	per := (n + chunks - 1) / chunks
	b.workers().run((n+per-1)/per, func(c int) { f(c*per, min((c+1)*per, n)) })
}

func (b *Backend) ReadRows(t backend.Tensor, out []float32) {
	x := t.(*Tensor)
	copy(out, x.d[:x.rows*x.cols])
}

func (b *Backend) Argmax(t backend.Tensor) []int32 {
	x := t.(*Tensor)
	ids := make([]int32, x.rows)
	for r := range ids {
		row := x.Row(r)
		best, finite := 0, true
		for i, v := range row {
			if v > row[best] {
				best = i
			}
			if !(v <= math.MaxFloat32) { // NaN or +Inf: a broken model (-Inf is a mask)
				finite = false
			}
		}
		ids[r] = int32(best)
		if !finite {
			ids[r] = backend.NonFiniteRow
		}
	}
	return ids
}

func (b *Backend) GatherLogitRows(dst, src backend.Tensor) {
	d, s := dst.(*Tensor), src.(*Tensor)
	for i, r := range b.step.LogitRows {
		copy(d.Row(i), s.Row(r))
	}
}

// WriteRows copies host data into t (tests and tools).
func WriteRows(t backend.Tensor, data []float32) { copy(t.(*Tensor).d, data) }
