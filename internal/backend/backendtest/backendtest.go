// Package backendtest is the op conformance test every backend runs: each
// op is run on the backend under test and on the reference CPU backend
// (the one registered as "cpu") on fresh random inputs, and the outputs
// are compared by normalised error ‖out−ref‖/‖ref‖ against a per-op
// bound. Outputs are poisoned with NaN first, so an element a backend
// forgets to write fails the check.
//
// Inputs reach a backend only through the Backend interface: a random
// matrix is uploaded as a dense f32 table and Embed-ded into a tensor
// (tokens 0..T-1 select its rows), then viewed to the shape needed.
//
// The seed comes from the clock and is logged; MLXCEL_TEST_SEED repeats a
// run.
package backendtest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/settings"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// Tolerancer is implemented by backends whose results are not f32-exact
// for some ops (bf16 activations, TF32 products). Tolerance returns the
// normalised-error bound for op on an input of the given row count, or 0
// for the default.
type Tolerancer interface {
	Tolerance(op string, rows int) float64
}

// DefaultTol is the bound for backends that compute in f32: different
// summation orders stay far below it.
const DefaultTol = 1e-5

// reference opens the CPU backend the suites compare against and picks
// the run's seed (MLXCEL_TEST_SEED repeats one).
func reference(t *testing.T) (backend.Backend, int64) {
	t.Helper()
	ref, err := backend.New("cpu", backend.Options{})
	if err != nil {
		t.Fatalf("reference backend: %v (import the cpu backend in this test)", err)
	}
	seed := time.Now().UnixNano()
	if s := settings.Get("MLXCEL_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	return ref, seed
}

// Run runs the whole suite on b. The test binary must link the CPU
// backend (import _ ".../internal/backend/cpu").
func Run(t *testing.T, b backend.Backend) {
	t.Helper()
	ref, seed := reference(t)
	defer ref.Close()
	t.Logf("%s vs cpu: seed %d (MLXCEL_TEST_SEED=%d repeats this run)", b.Name(), seed, seed)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &env{t: t, rng: rand.New(rand.NewSource(seed)), test: b, ref: ref}
			c.run(e)
			if err := b.Sync(); err != nil {
				t.Fatalf("%s: Sync: %v", b.Name(), err)
			}
		})
	}
}

// RunKV runs the attention cases (those named Attention*) with every KV
// store at dtype d on both sides: the backend under test against the CPU
// reference at the same dtype, so both round K and V to the same codes and
// what is compared is the backend's attention over them. Their op names
// end in /kv=<d>, for the Tolerancer. The test binary must link the CPU
// backend.
func RunKV(t *testing.T, b backend.Backend, d backend.KVDtype) {
	t.Helper()
	ref, seed := reference(t)
	defer ref.Close()
	t.Logf("%s vs cpu, KV %s: seed %d (MLXCEL_TEST_SEED=%d repeats this run)", b.Name(), d, seed, seed)
	for _, c := range cases {
		if !strings.HasPrefix(c.name, "Attention") {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			e := &env{t: t, rng: rand.New(rand.NewSource(seed)), test: b, ref: ref, kvDtype: d}
			c.run(e)
			if err := b.Sync(); err != nil {
				t.Fatalf("%s: Sync: %v", b.Name(), err)
			}
		})
	}
}

type testCase struct {
	name string
	run  func(e *env)
}

var cases []testCase

func register(name string, f func(e *env)) { cases = append(cases, testCase{name, f}) }

// env runs one case on both backends.
type env struct {
	t         *testing.T
	rng       *rand.Rand
	test, ref backend.Backend
	batch     *backend.Batch
	kvDtype   backend.KVDtype // RunKV: every KV store's dtype ("" as the case asks)
}

// pair is the same tensor on the backend under test (a) and the reference (b).
type pair struct{ a, b backend.Tensor }
type wpair struct{ a, b backend.Weight }

func (e *env) fatalf(format string, args ...any) {
	e.t.Helper()
	e.t.Fatalf(format, args...)
}

func (e *env) weight(h *tensor.Host) wpair {
	e.t.Helper()
	a, err := e.test.UploadWeight(h)
	if err != nil {
		e.fatalf("%s: upload %s: %v", e.test.Name(), h.Name, err)
	}
	b, err := e.ref.UploadWeight(h)
	if err != nil {
		e.fatalf("cpu: upload %s: %v", h.Name, err)
	}
	return wpair{a, b}
}

func (e *env) step(batch *backend.Batch) {
	e.t.Helper()
	e.batch = batch
	if err := e.test.BeginStep(batch); err != nil {
		e.fatalf("%s: BeginStep: %v", e.test.Name(), err)
	}
	if err := e.ref.BeginStep(batch); err != nil {
		e.fatalf("cpu: BeginStep: %v", err)
	}
}

// simpleStep begins a step of one sequence of n tokens 0..n-1 at
// positions 0..n-1 (what input() needs), with the given logit rows.
func (e *env) simpleStep(n int, logitRows ...int) {
	b := &backend.Batch{Tokens: make([]int32, n), Positions: make([]int32, n), LogitRows: logitRows,
		Seqs: []backend.SeqSlice{{Start: 0, Len: n, Blocks: []int32{0}}}}
	for i := range n {
		b.Tokens[i], b.Positions[i] = int32(i), int32(i)
	}
	e.step(b)
}

// kvStores makes the same KV store on the backend under test and on the
// reference.
func (e *env) kvStores(spec backend.KVSpec) (test, ref backend.KVStore) {
	e.t.Helper()
	if e.kvDtype != "" {
		spec.Dtype = e.kvDtype
	}
	test, err := e.test.NewKVStore(spec)
	if err != nil {
		e.fatalf("%s: NewKVStore: %v", e.test.Name(), err)
	}
	ref, err = e.ref.NewKVStore(spec)
	if err != nil {
		e.fatalf("cpu: NewKVStore: %v", err)
	}
	return test, ref
}

// planStep begins a step in which sequence s gets plan[s] new tokens (0:
// absent from the step) after the lens[s] it already holds in the cache,
// with block table tables[s] and distinct token ids (what input needs). It
// advances lens and returns the step's token count.
func (e *env) planStep(plan []int, tables [][]int32, lens []int) int {
	b := &backend.Batch{}
	for s, n := range plan {
		if n == 0 {
			continue
		}
		b.Seqs = append(b.Seqs, backend.SeqSlice{Start: len(b.Tokens), Len: n, Blocks: tables[s]})
		for i := 0; i < n; i++ {
			b.Tokens = append(b.Tokens, int32(len(b.Tokens)))
			b.Positions = append(b.Positions, int32(lens[s]+i))
		}
		lens[s] += n
	}
	e.step(b)
	return len(b.Tokens)
}

// qkv returns random q, k and v rows for a T-token step of an attention
// with the given heads, kv heads and head dim.
func (e *env) qkv(T, heads, kvh, hd int) (q, k, v pair) {
	q = e.input(T, heads*hd, e.randn(T*heads*hd, 1))
	k = e.input(T, kvh*hd, e.randn(T*kvh*hd, 1))
	v = e.input(T, kvh*hd, e.randn(T*kvh*hd, 1))
	return q, k, v
}

func (e *env) randn(n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(e.rng.NormFloat64() * scale)
	}
	return x
}

func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// input puts data (rows*cols values) into a tensor on both backends. The
// current step's tokens must be distinct; row r of the embedded table is
// placed at token id tokens[r].
func (e *env) input(rows, cols int, data []float32) pair {
	e.t.Helper()
	toks := e.batch.Tokens
	T := len(toks)
	W := max(1, (rows*cols+T-1)/T)
	V := 0
	for _, id := range toks {
		V = max(V, int(id)+1)
	}
	tab := make([]float32, V*W)
	if data != nil {
		for r, id := range toks {
			lo := r * W
			if lo >= len(data) {
				break
			}
			copy(tab[int(id)*W:int(id+1)*W], data[lo:min(lo+W, len(data))])
		}
	} else {
		for i := range tab {
			tab[i] = float32(math.NaN())
		}
	}
	w := e.weight(&tensor.Host{Name: "input", Shape: []int{V, W}, DType: tensor.F32, Data: f32Bytes(tab)})
	var p pair
	for i, be := range []backend.Backend{e.test, e.ref} {
		ww := w.a
		if i == 1 {
			ww = w.b
		}
		t := be.NewTensor(T, W)
		be.Embed(t, ww)
		v := be.View(t, rows, cols)
		if i == 0 {
			p.a = v
		} else {
			p.b = v
		}
	}
	return p
}

// poisoned is an output tensor filled with NaN.
func (e *env) poisoned(rows, cols int) pair { return e.input(rows, cols, nil) }

func (e *env) tol(op string, rows int) float64 {
	op = e.opName(op)
	if tl, ok := e.test.(Tolerancer); ok {
		if v := tl.Tolerance(op, rows); v > 0 {
			return v
		}
	}
	return DefaultTol
}

// check reads p from both backends and compares.
func (e *env) check(op string, p pair, rows int) {
	e.t.Helper()
	n := p.a.Rows() * p.a.Cols()
	got, want := make([]float32, n), make([]float32, n)
	e.test.ReadRows(p.a, got)
	e.ref.ReadRows(p.b, want)
	compare(e.t, e.opName(op), got, want, e.tol(op, rows))
}

// opName is op as the Tolerancer and the failures name it: with the KV
// dtype of a RunKV case.
func (e *env) opName(op string) string {
	if e.kvDtype != "" {
		return op + "/kv=" + string(e.kvDtype)
	}
	return op
}

func compare(t *testing.T, op string, got, want []float32, bound float64) {
	t.Helper()
	var num, den float64
	for i := range got {
		if math.IsNaN(float64(got[i])) != math.IsNaN(float64(want[i])) {
			t.Errorf("%s: element %d is %v, reference %v (unwritten or NaN)", op, i, got[i], want[i])
			return
		}
		if math.IsNaN(float64(want[i])) {
			continue
		}
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	rel := math.Sqrt(num / max(den, 1e-30))
	if rel > bound || math.IsNaN(rel) {
		t.Errorf("%s: normalised error %.3g > %.3g", op, rel, bound)
	} else if testing.Verbose() {
		t.Logf("%s: normalised error %.3g (bound %.3g)", op, rel, bound)
	}
}

// denseHost builds a dense weight of the given dtype from float data; the
// reference and the backend get the same bytes.
func denseHost(name string, shape []int, x []float32, dt tensor.DType) *tensor.Host {
	var b []byte
	switch dt {
	case tensor.F32:
		b = f32Bytes(x)
	case tensor.BF16, tensor.F16:
		b = make([]byte, 2*len(x))
		for i, v := range x {
			h := tensor.F32ToBF16(v)
			if dt == tensor.F16 {
				h = tensor.F32ToF16(v)
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
	default:
		panic(fmt.Sprintf("denseHost: %s", dt))
	}
	return &tensor.Host{Name: name, Shape: shape, DType: dt, Data: b}
}

// quantHost quantizes x ([experts*out, in]) with MLX's rule and stores
// scales and biases as sdt.
func quantHost(name string, shape []int, x []float32, bits, group int, sdt tensor.DType) *tensor.Host {
	in := shape[len(shape)-1]
	rows := len(x) / in
	words, sc, bi, err := quant.Quantize(x, rows, in, bits, group)
	if err != nil {
		panic(err)
	}
	wb := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(wb[4*i:], w)
	}
	enc := func(v []float32) []byte { return denseHost("", nil, v, sdt).Data }
	return &tensor.Host{Name: name, Shape: shape, Data: wb,
		Quant: &tensor.Quant{Bits: bits, GroupSize: group, Scales: enc(sc), Biases: enc(bi), ScaleDType: sdt}}
}
