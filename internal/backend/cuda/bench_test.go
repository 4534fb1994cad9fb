//go:build linux

package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/quant"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// The benchmarks run as a test so one prebuilt binary does everything on
// the GPU machine: MLXCEL_CUDA_BENCH=1 enables them, MLXCEL_BENCH_CSV names
// the CSV to append to. They print a table at the end.

type benchOut struct {
	t    *testing.T
	rows []string
	csv  *os.File
}

func (o *benchOut) add(bench, config string, rows int, shape string, us, gbps, ratio float64, note string) {
	line := fmt.Sprintf("%s,%s,%d,%s,%.2f,%.1f,%.3f,%s", bench, config, rows, shape, us, gbps, ratio, note)
	o.rows = append(o.rows, line)
	if o.csv != nil {
		fmt.Fprintln(o.csv, line)
	}
}

func benchEnabled(t *testing.T) *benchOut {
	if os.Getenv("MLXCEL_CUDA_BENCH") == "" {
		t.Skip("set MLXCEL_CUDA_BENCH=1 to run the GPU benchmarks")
	}
	o := &benchOut{t: t}
	if p := os.Getenv("MLXCEL_BENCH_CSV"); p != "" {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := f.Stat(); st.Size() == 0 {
			fmt.Fprintln(f, "bench,config,rows,shape,time_us,GB_per_s,ratio_to_copy,note")
		}
		o.csv = f
	}
	return o
}

func (o *benchOut) print() {
	fmt.Println("bench,config,rows,shape,time_us,GB_per_s,ratio_to_copy,note")
	for _, r := range o.rows {
		fmt.Println(r)
	}
	if o.csv != nil {
		o.csv.Close()
	}
}

// rnd fills bytes quickly (xorshift): benchmark weights need not be
// well distributed, only not constant.
func rnd(n int, seed uint64) []byte {
	b := make([]byte, n)
	s := seed | 1
	for i := 0; i+8 <= n; i += 8 {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		binary.LittleEndian.PutUint64(b[i:], s)
	}
	return b
}

// scaleBytes is n bf16 values near v (random low mantissa bits).
func scaleBytes(n int, v float32, seed uint64) []byte {
	b := rnd(2*n, seed)
	h := tensor.F32ToBF16(v)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint16(b[2*i:], h^uint16(b[2*i]&0x1f))
	}
	return b
}

func q4Host(name string, out, in int, seed uint64) *tensor.Host {
	ng := out * in / 64
	return &tensor.Host{Name: name, Shape: []int{out, in}, Data: rnd(out*in/2, seed),
		Quant: &tensor.Quant{Bits: 4, GroupSize: 64, ScaleDType: tensor.BF16,
			Scales: scaleBytes(ng, 0.004, seed+1), Biases: scaleBytes(ng, -0.03, seed+2)}}
}

func weightHost(kind string, out, in int, seed uint64) *tensor.Host {
	switch kind {
	case "q4g64":
		return q4Host("w", out, in, seed)
	case "q8g64":
		ng := out * in / 64
		return &tensor.Host{Name: "w", Shape: []int{out, in}, Data: rnd(out*in, seed),
			Quant: &tensor.Quant{Bits: 8, GroupSize: 64, ScaleDType: tensor.BF16,
				Scales: scaleBytes(ng, 0.0003, seed+1), Biases: scaleBytes(ng, -0.03, seed+2)}}
	case "bf16":
		return &tensor.Host{Name: "w", Shape: []int{out, in}, DType: tensor.BF16, Data: scaleBytes(out*in, 0.01, seed)}
	case quant.MXFP4, quant.NVFP4, quant.MXFP8:
		return fpHost(kind, out, in, seed)
	}
	panic(kind)
}

// fpHost is a weight in one of the floating-point modes: random codes,
// scale bytes in a narrow range (E8M0 near 2^-8, E4M3 0.5-0.94). The
// bytes a call reads are the uploaded ones (weight.bytes: codes and a u32
// a group), which is what the copy-rate fraction divides.
func fpHost(mode string, out, in int, seed uint64) *tensor.Host {
	bits, group, _ := quant.FPParams(mode)
	sc := rnd(out*in/group+8, seed+1)[:out*in/group]
	for i := range sc {
		if mode == quant.NVFP4 {
			sc[i] = 0x30 | sc[i]&7
		} else {
			sc[i] = 116 + sc[i]&7
		}
	}
	return &tensor.Host{Name: "w", Shape: []int{out, in}, DType: tensor.U32, Data: rnd(out*in*bits/8, seed),
		Quant: &tensor.Quant{Bits: bits, GroupSize: group, Scales: sc, ScaleDType: tensor.U8, Mode: mode}}
}

// copyRate measures the device's copy rate (CopyGBps over 2 x 1 GiB), the
// yardstick for the GEMV kernels.
func copyRate(t *testing.T, b *Backend, o *benchOut) float64 {
	const n = 1 << 30 // bytes per buffer
	gbps, err := b.CopyGBps(n)
	if err != nil {
		t.Fatal(err)
	}
	o.add("copy", "copy_f32x4", 0, "2x1GiB", 2*n/gbps/1e3, gbps, 1, "read+write")
	return gbps
}

// timeLinear times calls Linear calls spread over enough weight copies to
// defeat the 50 MB L2, as one replayed graph, and returns the median time
// per call over 5 timed replays.
var benchWeights = map[string][]backend.Weight{}

func timeLinear(t *testing.T, b *Backend, kind string, rows, out, in int) (time.Duration, int) {
	key := fmt.Sprintf("%s/%dx%d", kind, out, in)
	ws := benchWeights[key]
	if ws == nil {
		h := weightHost(kind, out, in, uint64(out*7+in))
		for len(ws) == 0 || len(ws)*ws[0].(*weight).bytes < 400<<20 {
			w, err := b.UploadWeight(h)
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
		benchWeights[key] = ws
	}
	wb := ws[0].(*weight).bytes
	if err := b.BeginStep(&backend.Batch{Tokens: make([]int32, rows), Positions: make([]int32, rows),
		Seqs: []backend.SeqSlice{{Start: 0, Len: rows}}}); err != nil {
		t.Fatal(err)
	}
	x := b.NewTensor(rows, in)
	y := b.NewTensor(rows, out)
	b.Scale(x, 1)
	tm := b.NewTimer()
	const calls = 40
	var ds []time.Duration
	for it := 0; it < 7; it++ {
		tm.Start()
		for c := 0; c < calls; c++ {
			b.Linear(y, x, ws[c%len(ws)], nil)
		}
		d := tm.Stop()
		if it >= 2 { // run 0 direct, run 1 captures, then replays
			ds = append(ds, d/calls)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], wb
}

// TestCeilings measures only the two ceilings the ladder's note divides by
// (the copy kernel's rate and cuBLAS's bf16 GEMM), for a device call that
// runs the ladder beside them.
func TestCeilings(t *testing.T) {
	o := benchEnabled(t)
	b := newOrSkip(t)
	defer b.Close()
	copyRate(t, b, o)
	gemmCeiling(t, b, o)
	o.print()
}

func TestBench(t *testing.T) {
	o := benchEnabled(t)
	b := newOrSkip(t)
	defer b.Close()
	copyGB := copyRate(t, b, o)
	gemmCeiling(t, b, o)
	shapes := [][2]int{{4096, 4096}, {14336, 4096}, {4096, 14336}, {1024, 4096}, {128256, 4096}}
	lin := func(kind string, rows int, s [2]int, cfg string) {
		d, wb := timeLinear(t, b, kind, rows, s[0], s[1])
		gbps := float64(wb) / d.Seconds() / 1e9
		o.add("linear", cfg, rows, fmt.Sprintf("%dx%d", s[0], s[1]), float64(d.Nanoseconds())/1e3, gbps, gbps/copyGB, "")
	}
	for _, s := range shapes {
		lin("q4g64", 1, s, "q4g64")
	}
	// Short rows (MoE experts, 2048-wide models): row-group kernels.
	for _, s := range [][2]int{{768, 2048}, {2048, 768}, {6144, 2048}} {
		lin("q4g64", 1, s, "q4g64")
	}
	lin("q8g64", 1, shapes[1], "q8g64")
	lin("bf16", 1, shapes[1], "bf16")
	// MLX's floating-point modes (fpquant.go): one row, and 8 on the rows
	// kernels; 2880 is gpt-oss's hidden width.
	for _, mode := range []string{quant.MXFP4, quant.NVFP4, quant.MXFP8} {
		lin(mode, 1, shapes[0], mode)
		lin(mode, 1, shapes[1], mode)
		lin(mode, 8, shapes[1], mode)
	}
	lin(quant.MXFP4, 1, [2]int{5760, 2880}, quant.MXFP4)
	lin(quant.MXFP4, 1, [2]int{2880, 4096}, quant.MXFP4)
	// Several activation rows: the tensor-core kernels (qmma4).
	for _, rows := range []int{2, 8, 16, 32} {
		for _, s := range shapes[:3] {
			lin("q4g64", rows, s, "q4g64-mma")
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("MLXCEL_BENCH_DECODE") != "0" {
		decodeBench(t, b, o)
	}
	o.print()
}

// TestBenchQMM times 4-bit products of 32 to 128 activation rows on the
// fused qmm4 kernels (qmm4's two forms and, on sm_90a, the warpgroup
// forms) against the paths before them (qmma4 up to 32 rows,
// cuBLAS on dequantized weights above), interleaved in one run: the
// measurement behind plan.QMMMinRows and QMMMaxRows.
func TestBenchQMM(t *testing.T) {
	o := benchEnabled(t)
	b := newOrSkip(t)
	defer b.Close()
	copyGB := copyRate(t, b, o)
	def := b.Tuning
	for _, rows := range []int{64, 128, 256} { // qmm4 from 9 rows here, to compare
		for _, s := range [][2]int{{4096, 4096}, {14336, 4096}, {4096, 14336}, {1024, 4096}} {
			cfgs := []string{"before", "qmm_wide", "qmm_m2d1"}
			if def.QMMWarpgroup {
				cfgs = append(cfgs, "qmm_w128")
				for _, v := range b.qmmwCandidates {
					cfgs = append(cfgs, "qmm_"+v)
				}
			}
			for _, cfg := range cfgs {
				b.Tuning = def
				b.Tuning.QMMMinRows, b.Tuning.QMMMaxRows = 0, 0
				if cfg != "before" {
					b.Tuning.QMMMinRows, b.Tuning.QMMMaxRows = 9, 1<<20
					b.Tuning.QMMVariant = strings.TrimPrefix(strings.TrimPrefix(cfg, "qmm"), "_")
				}
				d, wb := timeLinear(t, b, "q4g64", rows, s[0], s[1])
				gbps := float64(wb) / d.Seconds() / 1e9
				o.add("linear", "q4g64-"+cfg, rows, fmt.Sprintf("%dx%d", s[0], s[1]), float64(d.Nanoseconds())/1e3, gbps, gbps/copyGB, "")
			}
		}
	}
	b.Tuning = def
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	o.print()
}

// gemmCeiling measures cuBLAS bf16 GEMM (f32 accumulation and output, the
// prefill path's call) on 8192^3: the compute ceiling beside the copy.
func gemmCeiling(t *testing.T, b *Backend, o *benchOut) {
	const n = 8192
	b.mu.Lock()
	unbind := b.bind()
	a, err1 := b.allocPersistent(n * n * 2)
	w, err2 := b.allocPersistent(n * n * 2)
	c, err3 := b.allocPersistent(n * n * 4)
	unbind()
	b.mu.Unlock()
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatal(err1, err2, err3)
	}
	// Random bf16 operands (zeros run faster than real data).
	b.mu.Lock()
	b.newLaunch("fill_f32", b.gridFor(n*n), 1, 1, 256).p(c).f(0.37).i64(n * n)
	b.newLaunch("f32_to_bf16", b.gridFor(n*n), 1, 1, 256).p(a).p(c).i64(n * n)
	b.newLaunch("f32_to_bf16", b.gridFor(n*n), 1, 1, 256).p(w).p(c).i64(n * n)
	b.mu.Unlock()
	tm := b.NewTimer()
	var ds []time.Duration
	for it := 0; it < 6; it++ {
		tm.Start()
		b.mu.Lock()
		b.rec.ls = append(b.rec.ls, launch{fn: fnGemm})
		l := &b.rec.ls[len(b.rec.ls)-1]
		l.p(c).p(a).p(w).i(n).i(n).i(n).i(1)
		b.rec.gemm = true
		b.mu.Unlock()
		if it > 0 {
			ds = append(ds, tm.Stop())
		} else {
			tm.Stop()
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	d := ds[len(ds)/2]
	tf := 2 * float64(n) * n * n / d.Seconds() / 1e12
	o.add("gemm", "cublas-bf16-f32acc", n, "8192^3", float64(d.Microseconds()), tf, 0, "TFLOP/s in GB_per_s column")
}

// llama8b is Llama-3.1-8B's geometry.
var llama8b = struct{ hidden, heads, kvh, hd, inter, vocab, layers int }{4096, 32, 8, 128, 14336, 128256, 32}

// decodeBench runs a synthetic Llama-3.1-8B in 4-bit (random weights) end
// to end through the backend's ops, the way model code drives it: a
// 128-token prefill, then greedy decode steps, with graphs on and off.
func decodeBench(t *testing.T, b *Backend, o *benchOut) {
	m := llama8b
	t0 := time.Now()
	up := func(h *tensor.Host) backend.Weight {
		w, err := b.UploadWeight(h)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	hq, hk, ho := q4Host("q", m.heads*m.hd, m.hidden, 1), q4Host("k", m.kvh*m.hd, m.hidden, 2), q4Host("o", m.hidden, m.heads*m.hd, 3)
	hg, hd := q4Host("g", m.inter, m.hidden, 4), q4Host("d", m.hidden, m.inter, 5)
	norm := &tensor.Host{Name: "n", Shape: []int{m.hidden}, DType: tensor.BF16, Data: scaleBytes(m.hidden, 1, 6)}
	type layer struct{ q, k, v, o, g, u, d, n1, n2 backend.Weight }
	ls := make([]layer, m.layers)
	for i := range ls {
		ls[i] = layer{up(hq), up(hk), up(hk), up(ho), up(hg), up(hg), up(hd), up(norm), up(norm)}
	}
	emb, head, nf := up(q4Host("e", m.vocab, m.hidden, 7)), up(q4Host("h", m.vocab, m.hidden, 8)), up(norm)
	t.Logf("synthetic llama-3.1-8b 4-bit uploaded in %v", time.Since(t0))
	inv := make([]float32, m.hd/2)
	for i := range inv {
		inv[i] = float32(math.Pow(500000, -2*float64(i)/float64(m.hd)))
	}
	rope := backend.RoPE{InvFreq: inv, RotaryDim: m.hd, Scale: 1}
	ap := backend.AttnParams{Heads: m.heads, KVHeads: m.kvh, HeadDim: m.hd, Scale: float32(1 / math.Sqrt(float64(m.hd)))}
	const bs, prompt, steps = 16, 128, 64
	// Activation buffers are made once per token count and kept, as the
	// model package does, so steady decode steps replay one graph.
	type acts struct{ x, h, q, k, v, a, o2, g, u, hl, logits backend.Tensor }
	bufs := map[[2]int]*acts{}
	forward := func(batch *backend.Batch, kv backend.KVStore) []int32 {
		if err := b.BeginStep(batch); err != nil {
			t.Fatal(err)
		}
		T, L := len(batch.Tokens), len(batch.LogitRows)
		ab := bufs[[2]int{T, L}]
		if ab == nil {
			ab = &acts{b.NewTensor(T, m.hidden), b.NewTensor(T, m.hidden), b.NewTensor(T, m.heads*m.hd),
				b.NewTensor(T, m.kvh*m.hd), b.NewTensor(T, m.kvh*m.hd), b.NewTensor(T, m.heads*m.hd),
				b.NewTensor(T, m.hidden), b.NewTensor(T, m.inter), b.NewTensor(T, m.inter),
				b.NewTensor(L, m.hidden), b.NewTensor(L, m.vocab)}
			bufs[[2]int{T, L}] = ab
		}
		x, h, q, k, v, a, o2, g, u := ab.x, ab.h, ab.q, ab.k, ab.v, ab.a, ab.o2, ab.g, ab.u
		b.Embed(x, emb)
		for i, l := range ls {
			b.RMSNorm(h, x, l.n1, 1e-5)
			b.Linear(q, h, l.q, nil)
			b.Linear(k, h, l.k, nil)
			b.Linear(v, h, l.v, nil)
			b.ApplyRoPE(q, m.heads, m.hd, rope)
			b.ApplyRoPE(k, m.kvh, m.hd, rope)
			b.Attention(a, q, k, v, kv, i, ap)
			b.Linear(o2, a, l.o, nil)
			b.Add(x, x, o2)
			b.RMSNorm(h, x, l.n2, 1e-5)
			b.Linear(g, h, l.g, nil)
			b.Linear(u, h, l.u, nil)
			b.GatedAct(g, g, u, backend.SiLU)
			b.Linear(o2, g, l.d, nil)
			b.Add(x, x, o2)
		}
		hl, logits := ab.hl, ab.logits
		b.GatherLogitRows(hl, x)
		b.RMSNorm(hl, hl, nf, 1e-5)
		b.Linear(logits, hl, head, nil)
		return b.Argmax(logits)
	}
	// The default, then what each measured choice is worth: graphs, PDL,
	// decode attention's keys per split and heads per block.
	type cfg struct {
		nseq        int
		graphs, pdl bool
		splitKeys   int // attn_decode keys per split (0: default)
		heads       int // attn_decode query heads per block (0: default)
	}
	pdl, splitKeys, DecHeads := b.pdl, b.DecSplitKeys, b.DecHeads
	for _, c := range []cfg{{1, true, true, 0, 0}, {1, true, true, 0, 2}, {1, true, true, 0, 4}, {1, true, false, 0, 0},
		{1, false, true, 0, 0}, {1, true, true, 8, 0}, {1, true, true, 32, 0},
		{8, true, true, 0, 0}, {16, true, true, 0, 0}, {32, true, true, 0, 0}} {
		b.DecSplitKeys = splitKeys
		if c.splitKeys > 0 {
			b.DecSplitKeys = c.splitKeys
		}
		nseq, graphs := c.nseq, c.graphs
		{
			b.SetGraphs(graphs)
			b.mu.Lock()
			b.pdl = c.pdl && pdl
			b.DecHeads = DecHeads
			if c.heads > 0 {
				b.DecHeads = c.heads
			}
			unbind := b.bind()
			b.graphs.clear(b) // graphs captured with the other launch mode
			unbind()
			b.mu.Unlock()
			spec := backend.KVSpec{NumBlocks: nseq * (prompt + steps + bs) / bs, BlockSize: bs}
			for range m.layers {
				spec.Layers = append(spec.Layers, backend.KVLayer{KVHeads: m.kvh, HeadDim: m.hd})
			}
			kv, err := b.NewKVStore(spec)
			if err != nil {
				t.Fatal(err)
			}
			per := spec.NumBlocks / nseq
			tables := make([][]int32, nseq)
			for s := range tables {
				for j := 0; j < per; j++ {
					tables[s] = append(tables[s], int32(s*per+j))
				}
			}
			// Prefill each sequence (one step per sequence, 128 tokens).
			toks := make([]int32, nseq)
			var prefill time.Duration
			for s := 0; s < nseq; s++ {
				batch := &backend.Batch{LogitRows: []int{prompt - 1}, Seqs: []backend.SeqSlice{{Start: 0, Len: prompt, Blocks: tables[s]}}}
				for i := 0; i < prompt; i++ {
					batch.Tokens = append(batch.Tokens, int32((i*31+s)%m.vocab))
					batch.Positions = append(batch.Positions, int32(i))
				}
				tp := time.Now()
				toks[s] = forward(batch, kv)[0]
				prefill += time.Since(tp)
			}
			var dt time.Duration
			var gpu time.Duration
			tm := b.NewTimer()
			for st := 0; st < steps; st++ {
				batch := &backend.Batch{}
				for s := 0; s < nseq; s++ {
					batch.Seqs = append(batch.Seqs, backend.SeqSlice{Start: s, Len: 1, Blocks: tables[s]})
					batch.Tokens = append(batch.Tokens, toks[s])
					batch.Positions = append(batch.Positions, int32(prompt+st))
					batch.LogitRows = append(batch.LogitRows, s)
				}
				ts := time.Now()
				if st == steps-1 {
					tm.Start()
				}
				toks = forward(batch, kv)
				if st == steps-1 {
					gpu = tm.Stop()
				}
				if st >= 4 { // steps 0-1 launch directly and capture
					dt += time.Since(ts)
				}
			}
			n := steps - 4
			tokps := float64(n*nseq) / dt.Seconds()
			cfg := "graphs-off"
			if graphs {
				cfg = "graphs-on"
			}
			if !c.pdl || !pdl {
				cfg += "-nopdl"
			}
			if c.splitKeys > 0 {
				cfg += fmt.Sprintf("-splitkeys%d", c.splitKeys)
			}
			if c.heads > 0 {
				cfg += fmt.Sprintf("-decheads%d", c.heads)
			}
			o.add("decode-llama8b-q4", cfg, nseq, fmt.Sprintf("ctx%d", prompt+steps), float64(dt.Microseconds())/float64(n),
				tokps, 0, fmt.Sprintf("tok/s in GB_per_s column; last step device %.0fus; prefill %d tok %.1f ms/seq",
					float64(gpu.Microseconds()), prompt, float64(prefill.Microseconds())/1e3/float64(nseq)))
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if nseq == 1 && graphs && c.pdl && c.splitKeys == 0 && c.heads == 0 {
				// One profiled step: where the device time of a decode step goes.
				b.SetProfile(true)
				batch := &backend.Batch{Tokens: toks[:1], Positions: []int32{int32(prompt + steps)}, LogitRows: []int{0},
					Seqs: []backend.SeqSlice{{Start: 0, Len: 1, Blocks: tables[0]}}}
				forward(batch, kv)
				var total time.Duration
				rep := b.ProfileReport()
				for _, e := range rep {
					total += e.Total
				}
				for _, e := range rep {
					o.add("profile-decode-b1", e.Name, e.Calls, "", float64(e.Total.Nanoseconds())/1e3, 0,
						e.Total.Seconds()/total.Seconds(), "ratio column: share of profiled device time")
				}
				b.SetProfile(false)
			}
		}
	}
	b.SetGraphs(true)
	b.mu.Lock()
	b.pdl, b.DecSplitKeys, b.DecHeads = pdl, splitKeys, DecHeads
	unbind := b.bind()
	b.graphs.clear(b)
	unbind()
	b.mu.Unlock()
	if os.Getenv("MLXCEL_BENCH_PREFILL") == "0" {
		return
	}
	// Prefill of one long prompt in chunks of 2048 tokens.
	for _, n := range []int{512, 2048, 8192} {
		c := struct{ n int }{n}
		spec := backend.KVSpec{NumBlocks: (c.n + bs) / bs, BlockSize: bs}
		for range m.layers {
			spec.Layers = append(spec.Layers, backend.KVLayer{KVHeads: m.kvh, HeadDim: m.hd})
		}
		kv, err := b.NewKVStore(spec)
		if err != nil {
			t.Fatal(err)
		}
		table := make([]int32, spec.NumBlocks)
		for i := range table {
			table[i] = int32(i)
		}
		var best time.Duration
		for rep := 0; rep < 2; rep++ {
			t0 := time.Now()
			for st := 0; st < c.n; st += 2048 {
				L := min(2048, c.n-st)
				batch := &backend.Batch{LogitRows: []int{L - 1}, Seqs: []backend.SeqSlice{{Start: 0, Len: L, Blocks: table}}}
				for i := 0; i < L; i++ {
					batch.Tokens = append(batch.Tokens, int32((st+i)*31%m.vocab))
					batch.Positions = append(batch.Positions, int32(st+i))
				}
				forward(batch, kv)
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(t0); rep == 0 || d < best {
				best = d
			}
		}
		// Matrix work 2*params*tokens plus causal attention 2*2*n^2/2*hd*heads per layer.
		params := float64(m.layers*(m.hidden*(m.heads+2*m.kvh)*m.hd+m.heads*m.hd*m.hidden+3*m.hidden*m.inter)) + float64(m.vocab*m.hidden)/float64(c.n)
		flops := 2*params*float64(c.n) + float64(m.layers)*2*float64(c.n)*float64(c.n)*float64(m.hd*m.heads)
		o.add("prefill-llama8b-q4", "flash+bf16", c.n, fmt.Sprintf("P%d", c.n), float64(best.Microseconds()), float64(c.n)/best.Seconds(),
			flops/best.Seconds()/1e12, "tok/s in GB_per_s column, TFLOP/s in ratio column")
	}
	c, r, d, f, lastErr := b.GraphStats()
	t.Logf("graphs: %d captured, %d replays, %d direct launches, %d failed (%v)", c, r, d, f, lastErr)
}

// TestBenchFlash times the prefill attention kernel alone, on one
// sequence of T tokens in one chunk (block size 16), counting 4*hd flops
// per (query head, query, key seen): on Llama-3.1-8B's shapes (32 query
// heads, 8 kv heads, head dim 128, causal) and Gemma 4's (32 query heads,
// 16 kv heads, head dim 256 with its 1024-key window or causal, and 512),
// each checked against the generic attention kernel (run once, untimed).
// MLXCEL_CUDA_BENCH=1 enables it (-test.run TestBenchFlash alone).
func TestBenchFlash(t *testing.T) {
	o := benchEnabled(t)
	b := newOrSkip(t)
	defer b.Close()
	defer o.print()
	flash2 := b.flash2
	defer func() { b.flash2 = flash2 }()
	rng := rand.New(rand.NewSource(7))
	m := llama8b
	// vers: 0 the generic kernel (reference only), 2 flash2_attn.
	for _, c := range []struct {
		bench                     string
		heads, kvh, hd, window, T int
		vers                      []int
	}{
		{"flash-llama8b", m.heads, m.kvh, m.hd, 0, 2048, []int{0, 2}},
		{"flash-llama8b", m.heads, m.kvh, m.hd, 0, 8192, []int{0, 2}},
		{"flash-gemma4", 32, 16, 256, 1024, 2048, []int{0, 2}},
		{"flash-gemma4", 32, 16, 256, 0, 2048, []int{0, 2}},
		{"flash-gemma4", 32, 16, 512, 0, 2048, []int{0, 2}},
	} {
		T, bs := c.T, 16
		p := backend.AttnParams{Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))), Window: c.window}
		spec := backend.KVSpec{NumBlocks: (T + bs - 1) / bs, BlockSize: bs, Layers: []backend.KVLayer{{KVHeads: c.kvh, HeadDim: c.hd}}}
		kv, err := b.NewKVStore(spec)
		if err != nil {
			t.Fatal(err)
		}
		batch := &backend.Batch{LogitRows: []int{T - 1}, Seqs: []backend.SeqSlice{{Start: 0, Len: T, Blocks: make([]int32, spec.NumBlocks)}}}
		for i := range spec.NumBlocks {
			batch.Seqs[0].Blocks[i] = int32(i)
		}
		for i := range T {
			batch.Tokens = append(batch.Tokens, int32(i))
			batch.Positions = append(batch.Positions, int32(i))
		}
		if err := b.BeginStep(batch); err != nil {
			t.Fatal(err)
		}
		// q, k, v: N(0, 1) rows placed by Embed (token i -> row i).
		input := func(cols int) backend.Tensor {
			x := make([]float32, T*cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			w, err := b.UploadWeight(&tensor.Host{Name: "x", Shape: []int{T, cols}, DType: tensor.F32, Data: f32le(x)})
			if err != nil {
				t.Fatal(err)
			}
			d := b.NewTensor(T, cols)
			b.Embed(d, w)
			return d
		}
		q, k, v := input(c.heads*c.hd), input(c.kvh*c.hd), input(c.kvh*c.hd)
		out := b.NewTensor(T, c.heads*c.hd)
		seen := 0.0 // (query, key) pairs
		for i := range T {
			seen += float64(i + 1)
			if c.window > 0 {
				seen -= float64(max(0, i+1-c.window))
			}
		}
		flops := 4 * float64(c.heads*c.hd) * seen
		shape := fmt.Sprintf("h%dkv%dd%d-causal", c.heads, c.kvh, c.hd)
		if c.window > 0 {
			shape = fmt.Sprintf("h%dkv%dd%d-win%d", c.heads, c.kvh, c.hd, c.window)
		}
		outs := make([][]float32, len(c.vers))
		var base time.Duration
		for vi, ver := range c.vers {
			b.flash2 = flash2
			if ver == 0 { // the device "refused" flash2: the generic kernel
				b.flash2 = map[string]map[int]bool{}
			}
			// One call stores K/V and runs the kernel; its attention
			// launch is then replayed alone.
			b.Attention(out, q, k, v, kv, 0, p)
			b.mu.Lock()
			fl := b.rec.ls[len(b.rec.ls)-1]
			name := map[int]string{0: "attention", 2: fmt.Sprintf("flash2_attn_%d", c.hd)}[ver]
			if fl.fn != b.fn(name) {
				b.mu.Unlock()
				t.Fatalf("T=%d %s: the last launch is not %s", T, shape, name)
			}
			b.mu.Unlock()
			outs[vi] = make([]float32, T*c.heads*c.hd)
			b.ReadRows(out, outs[vi])
			if ver == 0 {
				continue
			}
			d := replayMedian(b, []launch{fl})
			if base == 0 {
				base = d
			}
			o.add(c.bench, name, T, shape, float64(d.Nanoseconds())/1e3, flops/d.Seconds()/1e12, base.Seconds()/d.Seconds(),
				fmt.Sprintf("%.3f ms per call; TFLOP/s in GB_per_s column, speedup over the first timed kernel in ratio column", d.Seconds()*1e3))
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		var num, den float64
		ref, got := outs[0], outs[len(outs)-1]
		for i := range ref {
			dd := float64(got[i]) - float64(ref[i])
			num += dd * dd
			den += float64(ref[i]) * float64(ref[i])
		}
		rel := math.Sqrt(num / max(den, 1e-30))
		t.Logf("T=%d %s: %v outputs, last vs first: normalised difference %.3g", T, shape, c.vers, rel)
		if rel > 2e-3 || math.IsNaN(rel) || den == 0 {
			t.Errorf("T=%d %s: kernel %d differs from kernel %d by %.3g", T, shape, c.vers[len(c.vers)-1], c.vers[0], rel)
		}
	}
}

// replayMedian times ls recorded 10 times a run over 7 runs (run 0
// launches directly, run 1 captures a graph, the rest replay it) and
// returns the median time of one recording of ls among the replays.
func replayMedian(b *Backend, ls []launch) time.Duration {
	tm := b.NewTimer()
	const calls = 10
	var ds []time.Duration
	for it := 0; it < 7; it++ {
		tm.Start()
		b.mu.Lock()
		for range calls {
			b.rec.ls = append(b.rec.ls, ls...)
		}
		b.mu.Unlock()
		if d := tm.Stop(); it >= 2 {
			ds = append(ds, d/calls)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}
