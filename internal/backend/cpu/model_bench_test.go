package cpu_test

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model"
	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// Whole-model benchmarks on synthetic weights of Qwen2.5-0.5B's shapes
// (the model the CPU backend is tuned against, see docs/cpu-backend.md),
// so a profile of one step shows where a token's time goes:
//
//	go test ./internal/backend/cpu -run X -bench Qwen05 -cpuprofile /tmp/cpu.out

var (
	qwenOnce  sync.Once
	qwenModel *model.Model
	qwenErr   error
)

func qwen05(b *testing.B) *model.Model {
	qwenOnce.Do(func() {
		cfg, err := weights.LoadConfig("../../profiles/qwen2.5-0.5b-4bit")
		if err != nil {
			qwenErr = err
			return
		}
		qwenModel, _, qwenErr = synthetic.Build(cfg, cpu.New(0), synthetic.Options{})
	})
	if qwenErr != nil {
		b.Fatal(qwenErr)
	}
	return qwenModel
}

// qwenRun is a sequence in a fresh KV store with room for n positions.
type qwenRun struct {
	m      *model.Model
	kv     backend.KVStore
	blocks []int32
}

func newQwenRun(b *testing.B, m *model.Model, n int) *qwenRun {
	r := &qwenRun{m: m}
	r.kv, r.blocks = newKV(b, m, n)
	return r
}

// newKV makes a KV store for one sequence of n positions and its table.
func newKV(tb testing.TB, m *model.Model, n int) (backend.KVStore, []int32) {
	const bs = 16
	nb := (n + bs - 1) / bs
	kv, err := m.Backend().NewKVStore(backend.KVSpec{NumBlocks: nb, BlockSize: bs, Layers: m.KVLayers()})
	if err != nil {
		tb.Fatal(err)
	}
	blocks := make([]int32, nb)
	for i := range blocks {
		blocks[i] = int32(i)
	}
	return kv, blocks
}

// step runs n tokens from position pos, asking for the last row's argmax.
func (r *qwenRun) step(b *testing.B, pos, n int) {
	bt := &backend.Batch{Seqs: []backend.SeqSlice{{Len: n, Blocks: r.blocks}}, LogitRows: []int{n - 1}}
	for i := range n {
		bt.Tokens = append(bt.Tokens, int32(1000+(pos+i)%5000))
		bt.Positions = append(bt.Positions, int32(pos+i))
	}
	if _, err := r.m.ForwardArgmax(bt, r.kv); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkQwen05Prefill(b *testing.B) {
	for _, n := range []int{128, 512, 2048} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			m := qwen05(b)
			m.Reserve(n)
			r := newQwenRun(b, m, n)
			r.step(b, 0, n) // untimed: buffers and pools grow on the first step
			for b.Loop() {
				r.step(b, 0, n)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkQwen05Decode times one token after a 512- or 2048-token
// context.
func BenchmarkQwen05Decode(b *testing.B) {
	for _, ctx := range []int{512, 2048} {
		b.Run(fmt.Sprintf("ctx%d", ctx), func(b *testing.B) { benchDecode(b, ctx) })
	}
}

func benchDecode(b *testing.B, ctx int) {
	m := qwen05(b)
	m.Reserve(ctx)
	r := newQwenRun(b, m, ctx+1)
	r.step(b, 0, ctx)
	// QWEN_DECODE_PROFILE=file profiles the decode steps alone (with
	// -cpuprofile the prefill would dominate).
	if f := os.Getenv("QWEN_DECODE_PROFILE"); f != "" {
		w, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(w); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	for b.Loop() {
		r.step(b, ctx, 1)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}
