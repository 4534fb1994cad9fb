package cpu_test

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/model/synthetic"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// timed wraps the CPU backend and adds up the wall time of each op, keyed
// by op and (for Linear) the weight's shape: where a decode step's time
// goes, op by op, which a CPU profile (samples of both cores, kernels
// shared by many ops) does not say.
type timed struct {
	*cpu.Backend
	t map[string]time.Duration
}

func (b *timed) add(k string, t0 time.Time) { b.t[k] += time.Since(t0) }

func (b *timed) Linear(dst, x backend.Tensor, w, bias backend.Weight) {
	defer b.add(fmt.Sprintf("Linear %v", w.Shape()), time.Now())
	b.Backend.Linear(dst, x, w, bias)
}
func (b *timed) Attention(dst, q, k, v backend.Tensor, kv backend.KVStore, layer int, p backend.AttnParams) {
	defer b.add("Attention", time.Now())
	b.Backend.Attention(dst, q, k, v, kv, layer, p)
}
func (b *timed) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32) {
	defer b.add("RMSNorm", time.Now())
	b.Backend.RMSNorm(dst, x, w, eps)
}
func (b *timed) ApplyRoPE(x backend.Tensor, heads, headDim int, r backend.RoPE) {
	defer b.add("ApplyRoPE", time.Now())
	b.Backend.ApplyRoPE(x, heads, headDim, r)
}
func (b *timed) GatedAct(dst, gate, up backend.Tensor, act backend.Activation) {
	defer b.add("GatedAct", time.Now())
	b.Backend.GatedAct(dst, gate, up, act)
}
func (b *timed) Add(dst, a, c backend.Tensor) {
	defer b.add("Add", time.Now())
	b.Backend.Add(dst, a, c)
}
func (b *timed) Embed(dst backend.Tensor, table backend.Weight) {
	defer b.add("Embed", time.Now())
	b.Backend.Embed(dst, table)
}
func (b *timed) Argmax(t backend.Tensor) []int32 {
	defer b.add("Argmax", time.Now())
	return b.Backend.Argmax(t)
}

// TestQwen05OpTimes logs the time per op of decode steps after a
// 512-token context. It is a measurement, not a check, and builds a 0.5B
// model, so it only runs when asked:
//
//	QWEN_OPS=1 go test ./internal/backend/cpu -run OpTimes -v
func TestQwen05OpTimes(t *testing.T) {
	if os.Getenv("QWEN_OPS") == "" {
		t.Skip("set QWEN_OPS=1 to measure")
	}
	cfg, err := weights.LoadConfig("../../profiles/qwen2.5-0.5b-4bit")
	if err != nil {
		t.Fatal(err)
	}
	be := &timed{Backend: cpu.New(0), t: map[string]time.Duration{}}
	m, _, err := synthetic.Build(cfg, be, synthetic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const ctx, steps = 512, 40
	m.Reserve(ctx)
	r := &qwenRun{m: m}
	b := &testing.B{}
	r.kv, r.blocks = newKV(t, m, ctx+steps)
	r.step(b, 0, ctx)
	clear(be.t)
	t0 := time.Now()
	for i := range steps {
		r.step(b, ctx+i, 1)
	}
	total := time.Since(t0)
	var keys []string
	var sum time.Duration
	for k, v := range be.t {
		keys = append(keys, k)
		sum += v
	}
	sort.Slice(keys, func(i, j int) bool { return be.t[keys[i]] > be.t[keys[j]] })
	var sb strings.Builder
	per := func(d time.Duration) float64 { return float64(d) / float64(steps) / 1e6 }
	fmt.Fprintf(&sb, "decode after %d tokens: %.2f ms/token (%.1f tok/s)\n", ctx, per(total), float64(steps)/total.Seconds())
	for _, k := range keys {
		fmt.Fprintf(&sb, "  %-28s %6.3f ms\n", k, per(be.t[k]))
	}
	fmt.Fprintf(&sb, "  %-28s %6.3f ms\n", "(outside ops)", per(total-sum))
	t.Log(sb.String())
}
