package backendtest

import (
	"fmt"
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// wkind is one way of storing a linear weight.
type wkind struct {
	dt          tensor.DType // dense dtype, or scale dtype when bits > 0
	bits, group int
}

func (k wkind) String() string {
	if k.bits == 0 {
		return k.dt.String()
	}
	return fmt.Sprintf("q%dg%d-%s", k.bits, k.group, k.dt)
}

func (k wkind) host(name string, shape []int, x []float32) *tensor.Host {
	if k.bits == 0 {
		return denseHost(name, shape, x, k.dt)
	}
	return quantHost(name, shape, x, k.bits, k.group, k.dt)
}

var linearKinds = []wkind{
	{tensor.F32, 0, 0}, {tensor.BF16, 0, 0}, {tensor.F16, 0, 0},
	{tensor.BF16, 4, 64}, {tensor.BF16, 4, 32}, {tensor.BF16, 4, 128}, {tensor.F16, 4, 64}, {tensor.F32, 4, 64},
	{tensor.BF16, 8, 64}, {tensor.F16, 8, 32},
	{tensor.BF16, 2, 64}, {tensor.BF16, 3, 64}, {tensor.BF16, 5, 32}, {tensor.BF16, 6, 128},
}

func init() {
	register("Embed", func(e *env) {
		// Widths: 256, and rows of 2048 and 8192 words at 4 and 8 bits
		// (CUDA takes a thread per word, up to 1024 a block).
		for _, c := range []struct {
			k wkind
			D int
		}{{wkind{tensor.F32, 0, 0}, 256}, {wkind{tensor.BF16, 0, 0}, 256}, {wkind{tensor.F16, 0, 0}, 256},
			{wkind{tensor.BF16, 4, 64}, 256}, {wkind{tensor.F16, 8, 32}, 256}, {wkind{tensor.BF16, 3, 128}, 256},
			{wkind{tensor.F32, 6, 64}, 256}, {wkind{tensor.BF16, 4, 32}, 4096}, {wkind{tensor.BF16, 8, 64}, 8192}} {
			k, V, D, T := c.k, 37, c.D, 9
			w := e.weight(k.host("embed", []int{V, D}, e.randn(V*D, 1)))
			b := &backend.Batch{Seqs: []backend.SeqSlice{{Start: 0, Len: T}}}
			for i := range T {
				b.Tokens = append(b.Tokens, int32(e.rng.Intn(V)))
				b.Positions = append(b.Positions, int32(i))
			}
			e.step(b)
			out := e.poisoned(T, D)
			e.test.Embed(out.a, w.a)
			e.ref.Embed(out.b, w.b)
			e.check(fmt.Sprintf("Embed/%s/%d", k, D), out, T)
		}
	})

	register("Linear", func(e *env) {
		shapes := []struct{ n, k int }{{67, 256}, {130, 384}}
		for _, rows := range []int{1, 2, 3, 5, 8, 13, 40, 64, 97} {
			for ki, k := range linearKinds {
				s := shapes[(rows+ki)%len(shapes)]
				w := e.weight(k.host("w", []int{s.n, s.k}, e.randn(s.n*s.k, 0.05)))
				var bias wpair
				withBias := (rows+ki)%3 == 0
				if withBias {
					bias = e.weight(denseHost("bias", []int{s.n}, e.randn(s.n, 0.1), tensor.F32))
				}
				e.simpleStep(rows)
				x := e.input(rows, s.k, e.randn(rows*s.k, 1))
				out := e.poisoned(rows, s.n)
				e.test.Linear(out.a, x.a, w.a, bias.a)
				e.ref.Linear(out.b, x.b, w.b, bias.b)
				e.check(fmt.Sprintf("Linear/%s/rows=%d/bias=%v", k, rows, withBias), out, rows)
			}
		}
	})

	register("RMSNorm", func(e *env) {
		for _, c := range []struct {
			rows, cols    int
			weight, alias bool
		}{{1, 4096, true, false}, {7, 896, true, true}, {12, 128, false, false}, {3, 100, true, false}} {
			var w wpair
			if c.weight {
				w = e.weight(denseHost("norm", []int{c.cols}, e.randn(c.cols, 1), tensor.BF16))
			}
			e.simpleStep(c.rows)
			x := e.input(c.rows, c.cols, e.randn(c.rows*c.cols, 3))
			out := x
			if !c.alias {
				out = e.poisoned(c.rows, c.cols)
			}
			e.test.RMSNorm(out.a, x.a, w.a, 1e-6)
			e.ref.RMSNorm(out.b, x.b, w.b, 1e-6)
			e.check(fmt.Sprintf("RMSNorm/%dx%d/w=%v/alias=%v", c.rows, c.cols, c.weight, c.alias), out, c.rows)
		}
	})

	register("RoPE", func(e *env) {
		for _, c := range []struct{ heads, hd, rot int }{{4, 64, 64}, {2, 128, 64}, {3, 256, 128}} {
			T := 6
			inv := make([]float32, c.rot/2)
			for i := range inv {
				inv[i] = float32(math.Pow(10000, -2*float64(i)/float64(c.rot)))
			}
			b := &backend.Batch{Seqs: []backend.SeqSlice{{Start: 0, Len: T}}}
			for i := range T {
				b.Tokens = append(b.Tokens, int32(i))
				b.Positions = append(b.Positions, int32(e.rng.Intn(100000)))
			}
			e.step(b)
			x := e.input(T, c.heads*c.hd, e.randn(T*c.heads*c.hd, 1))
			r := backend.RoPE{InvFreq: inv, RotaryDim: c.rot, Scale: 1}
			if c.rot < c.hd {
				r.Scale = 1.25
			}
			e.test.ApplyRoPE(x.a, c.heads, c.hd, r)
			e.ref.ApplyRoPE(x.b, c.heads, c.hd, r)
			e.check(fmt.Sprintf("RoPE/h%d/d%d/rot%d", c.heads, c.hd, c.rot), x, T)
		}
	})

	register("Elementwise", func(e *env) {
		rows, cols := 5, 1000
		e.simpleStep(rows)
		for _, act := range []backend.Activation{backend.SiLU, backend.GELUTanh, backend.GELU} {
			g := e.input(rows, cols, e.randn(rows*cols, 2))
			u := e.input(rows, cols, e.randn(rows*cols, 1))
			out := e.poisoned(rows, cols)
			e.test.GatedAct(out.a, g.a, u.a, act)
			e.ref.GatedAct(out.b, g.b, u.b, act)
			e.check(fmt.Sprintf("GatedAct/%d", act), out, rows)
			e.test.GatedAct(g.a, g.a, u.a, act) // dst aliases gate
			e.ref.GatedAct(g.b, g.b, u.b, act)
			e.check(fmt.Sprintf("GatedAct/%d/alias", act), g, rows)
		}
		a := e.input(rows, cols, e.randn(rows*cols, 1))
		c := e.input(rows, cols, e.randn(rows*cols, 1))
		out := e.poisoned(rows, cols)
		e.test.Add(out.a, a.a, c.a)
		e.ref.Add(out.b, a.b, c.b)
		e.check("Add", out, rows)
		e.test.Add(a.a, a.a, c.a)
		e.ref.Add(a.b, a.b, c.b)
		e.check("Add/alias", a, rows)
		e.test.Scale(a.a, 0.37)
		e.ref.Scale(a.b, 0.37)
		e.check("Scale", a, rows)
		x := e.input(rows, cols, e.randn(rows*cols, 40))
		e.test.Softcap(x.a, 30)
		e.ref.Softcap(x.b, 30)
		e.check("Softcap", x, rows)
	})

	register("GatherArgmax", func(e *env) {
		T, V := 7, 3001
		logitRows := []int{6, 0, 3}
		e.simpleStep(T, logitRows...)
		data := e.randn(T*V, 1)
		data[2*V+17], data[2*V+1800] = 9, 9 // a tie: the first index wins
		src := e.input(T, V, data)
		out := e.poisoned(len(logitRows), V)
		e.test.GatherLogitRows(out.a, src.a)
		e.ref.GatherLogitRows(out.b, src.b)
		e.check("GatherLogitRows", out, len(logitRows))
		got, want := e.test.Argmax(src.a), e.ref.Argmax(src.b)
		for i := range want {
			if got[i] != want[i] {
				e.t.Errorf("Argmax row %d: %d, reference %d", i, got[i], want[i])
			}
		}
		if got[2] != 17 {
			e.t.Errorf("Argmax tie: %d, want 17", got[2])
		}
		// Vocabulary-long rows (CUDA splits them over blocks): a tie
		// across the row's far ends, a maximum in the last column, a NaN
		// (the row is backend.NonFiniteRow, whatever its maximum) and an
		// all -inf row (index 0: -inf is a mask, not a failure).
		T, V = 4, 151936
		e.simpleStep(T)
		data = e.randn(T*V, 1)
		data[40], data[V-3] = 10, 10
		data[V+V-1] = 9
		data[2*V+5], data[2*V+100000] = float32(math.NaN()), 12
		for i := 3 * V; i < 4*V; i++ {
			data[i] = float32(math.Inf(-1))
		}
		long := e.input(T, V, data)
		got, want = e.test.Argmax(long.a), e.ref.Argmax(long.b)
		for i, w := range []int{40, V - 1, backend.NonFiniteRow, 0} {
			if int(got[i]) != w || int(want[i]) != w {
				e.t.Errorf("Argmax of a %d-column row %d: %d, reference %d, want %d", V, i, got[i], want[i], w)
			}
		}
	})

	register("Sequences", runSequences)
	register("Attention", runAttention)
	register("AttentionLong", runLongAttention)
	register("MoE", runMoE)
}

// runAttention drives three steps over a paged cache: a prefill of two
// sequences (one chunked across steps), then mixed prefill and decode,
// then decode, with scattered block tables, GQA, a window and a softcap.
func runAttention(e *env) {
	for _, c := range []struct {
		heads, kvh, hd, bs, window int
		softcap                    float32
	}{{4, 2, 64, 4, 0, 0}, {8, 1, 128, 16, 0, 0}, {4, 4, 32, 8, 5, 0}, {6, 2, 256, 16, 0, 50},
		{6, 2, 64, 8, 9, 0}, {8, 2, 128, 16, 0, 30}} {
		p := backend.AttnParams{Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))),
			Window: c.window, Softcap: c.softcap}
		spec := backend.KVSpec{NumBlocks: 64, BlockSize: c.bs, Layers: []backend.KVLayer{{KVHeads: 1, HeadDim: 8}, {KVHeads: c.kvh, HeadDim: c.hd}}}
		kva, kvb := e.kvStores(spec)
		tables := e.scatteredTables(spec.NumBlocks, 30)
		lens := []int{0, 0, 0}
		// Each step: how many new tokens each sequence gets (0: absent).
		for si, plan := range [][]int{{13, 1, 0}, {1, 7, 20}, {1, 1, 1}} {
			T := e.planStep(plan, tables, lens)
			q, k, v := e.qkv(T, c.heads, c.kvh, c.hd)
			out := e.poisoned(T, c.heads*c.hd)
			e.test.Attention(out.a, q.a, k.a, v.a, kva, 1, p)
			e.ref.Attention(out.b, q.b, k.b, v.b, kvb, 1, p)
			e.check(fmt.Sprintf("Attention/h%d/kv%d/d%d/bs%d/win%d/cap%g/step%d", c.heads, c.kvh, c.hd, c.bs, c.window, c.softcap, si), out, T)
		}
	}
}

// runSequences runs op sequences as model code issues them (q/k/v
// projections of one input, gate/up then the gated activation, a residual
// add then a norm), which a backend may fuse; every output is compared.
func runSequences(e *env) {
	for _, rows := range []int{1, 3} {
		for _, k := range []wkind{{tensor.BF16, 4, 64}, {tensor.F16, 8, 64}, {tensor.BF16, 0, 0}} {
			hidden, qd, kd, inter := 256, 256, 64, 384
			wq := e.weight(k.host("q", []int{qd, hidden}, e.randn(qd*hidden, 0.05)))
			wk := e.weight(k.host("k", []int{kd, hidden}, e.randn(kd*hidden, 0.05)))
			wv := e.weight(k.host("v", []int{kd, hidden}, e.randn(kd*hidden, 0.05)))
			qb := e.weight(denseHost("qb", []int{qd}, e.randn(qd, 0.1), tensor.F32))
			wg := e.weight(k.host("g", []int{inter, hidden}, e.randn(inter*hidden, 0.05)))
			wu := e.weight(k.host("u", []int{inter, hidden}, e.randn(inter*hidden, 0.05)))
			norm := e.weight(denseHost("n", []int{hidden}, e.randn(hidden, 1), tensor.BF16))
			inv := make([]float32, 32)
			for i := range inv {
				inv[i] = float32(math.Pow(10000, -float64(i)/32))
			}
			rope := backend.RoPE{InvFreq: inv, RotaryDim: 64, Scale: 1}
			b := &backend.Batch{Seqs: []backend.SeqSlice{{Start: 0, Len: rows}}}
			for i := range rows {
				b.Tokens = append(b.Tokens, int32(i))
				b.Positions = append(b.Positions, int32(e.rng.Intn(5000)))
			}
			e.step(b)
			x := e.input(rows, hidden, e.randn(rows*hidden, 1))
			o := e.input(rows, hidden, e.randn(rows*hidden, 1))
			q, kk, v := e.poisoned(rows, qd), e.poisoned(rows, kd), e.poisoned(rows, kd)
			g, u, h := e.poisoned(rows, inter), e.poisoned(rows, inter), e.poisoned(rows, hidden)
			for i, be := range []backend.Backend{e.test, e.ref} {
				pick := func(p pair) backend.Tensor { return []backend.Tensor{p.a, p.b}[i] }
				pw := func(p wpair) backend.Weight { return []backend.Weight{p.a, p.b}[i] }
				be.Linear(pick(q), pick(x), pw(wq), pw(qb))
				be.Linear(pick(kk), pick(x), pw(wk), nil)
				be.Linear(pick(v), pick(x), pw(wv), nil)
				be.ApplyRoPE(pick(q), 4, 64, rope)
				be.ApplyRoPE(pick(kk), 1, 64, rope)
				be.Linear(pick(g), pick(x), pw(wg), nil)
				be.Linear(pick(u), pick(x), pw(wu), nil)
				be.GatedAct(pick(g), pick(g), pick(u), backend.SiLU)
				be.Add(pick(x), pick(x), pick(o))
				be.RMSNorm(pick(h), pick(x), pw(norm), 1e-5)
			}
			for _, c := range []struct {
				name string
				p    pair
			}{{"q", q}, {"k", kk}, {"v", v}, {"act", g}, {"up", u}, {"sum", x}, {"norm", h}} {
				e.check(fmt.Sprintf("Sequences/%s/rows=%d/%s", k, rows, c.name), c.p, rows)
			}
		}
	}
}

// runLongAttention covers contexts of several hundred keys, where a GPU
// backend may split one query's keys over several blocks, and past a
// thousand keys with a group of 8 query heads a kv head (Qwen3-30B-A3B's),
// which a GPU backend may split over blocks at long contexts; then head
// dims 256 and 512 at groups of 1, 2, 6 and 8, with a window and a
// softcap, q and k scratch or not (scratch lets a backend take another
// kernel, one that leaves them unwritten: only outputs are compared).
func runLongAttention(e *env) {
	for _, c := range []struct {
		heads, kvh, hd, prompt, window int
		softcap                        float32
		scratch                        bool
	}{{4, 2, 64, 700, 0, 0, false}, {8, 1, 128, 1100, 0, 0, false},
		{16, 2, 256, 1100, 0, 0, true}, {8, 1, 256, 1030, 0, 0, false}, {12, 2, 256, 600, 0, 40, true},
		{4, 2, 256, 1200, 700, 0, true}, {16, 2, 512, 1100, 0, 0, true}, {6, 1, 512, 900, 0, 0, false},
		{2, 2, 512, 1000, 300, 25, true}} {
		p := backend.AttnParams{Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))),
			Window: c.window, Softcap: c.softcap, ScratchQK: c.scratch}
		spec := backend.KVSpec{NumBlocks: 80, BlockSize: 16, Layers: []backend.KVLayer{{KVHeads: c.kvh, HeadDim: c.hd}}}
		kva, kvb := e.kvStores(spec)
		var table []int32
		for _, blk := range e.rng.Perm(spec.NumBlocks) {
			table = append(table, int32(blk))
		}
		qd, kd := c.heads*c.hd, c.kvh*c.hd
		pos := 0
		for si, n := range []int{c.prompt, 1, 1} {
			b := &backend.Batch{Seqs: []backend.SeqSlice{{Start: 0, Len: n, Blocks: table}}}
			for i := 0; i < n; i++ {
				b.Tokens = append(b.Tokens, int32(i))
				b.Positions = append(b.Positions, int32(pos+i))
			}
			pos += n
			e.step(b)
			q := e.input(n, qd, e.randn(n*qd, 1))
			k := e.input(n, kd, e.randn(n*kd, 1))
			v := e.input(n, kd, e.randn(n*kd, 1))
			out := e.poisoned(n, qd)
			e.test.Attention(out.a, q.a, k.a, v.a, kva, 0, p)
			e.ref.Attention(out.b, q.b, k.b, v.b, kvb, 0, p)
			name := fmt.Sprintf("AttentionLong/%dx%d/step%d/T%d", c.heads, c.kvh, si, n)
			if c.hd != 64 && c.hd != 128 { // (the first cases keep their names)
				name = fmt.Sprintf("AttentionLong/%dx%d/d%d/win%d/cap%g/scratch%v/step%d/T%d", c.heads, c.kvh, c.hd, c.window,
					c.softcap, c.scratch, si, n)
			}
			e.check(name, out, n)
		}
	}
}

// runMoE covers MoE steps of a few tokens. The first cases are small;
// the decode-shaped ones follow Qwen3-30B-A3B's structure scaled down (128
// experts, top-8, short expert rows, an 8-bit router as MLX stores it),
// plus two with few experts at real widths, so a backend's per-width
// kernel forms are reached. norm: an RMSNorm writes the MoE input just
// before (a decode layer's order, which a backend may fold into the
// router); its output is checked too.
func runMoE(e *env) {
	q4, q8f, q4h := wkind{tensor.BF16, 4, 64}, wkind{tensor.F32, 8, 32}, wkind{tensor.F16, 4, 64}
	bf, q8 := wkind{tensor.BF16, 0, 0}, wkind{tensor.BF16, 8, 64}
	for _, c := range []struct {
		k, router        wkind
		E, hidden, inter int
		topk             int
		renorm           bool
		act              backend.Activation
		T                int
		norm             bool
	}{
		{q4, bf, 8, 128, 192, 2, true, backend.SiLU, 5, false},
		{bf, bf, 8, 128, 192, 2, false, backend.SiLU, 1, false},
		{q8f, bf, 8, 128, 192, 3, false, backend.GELUTanh, 9, false},
		// Decode-shaped.
		{q4, q8, 128, 256, 128, 8, true, backend.SiLU, 1, true},
		{q4, bf, 128, 256, 128, 8, false, backend.SiLU, 3, true},
		{q8f, q4h, 128, 256, 96, 8, true, backend.GELUTanh, 1, false},
		{q8f, bf, 128, 256, 96, 8, false, backend.SiLU, 3, false},
		{q4, q8, 128, 256, 128, 8, true, backend.SiLU, 31, false},
		{q4, bf, 4, 2048, 768, 2, true, backend.SiLU, 1, true},    // Qwen3-30B-A3B's widths
		{q8, q4, 4, 1536, 1024, 2, false, backend.SiLU, 2, false}, // 8-bit rows of 96 and 64 chunks
		{q4, bf, 16, 256, 128, 4, false, backend.SiLU, 12, false}, // a backend's grouped path for few tokens, where it takes them
	} {
		router := e.weight(c.router.host("router", []int{c.E, c.hidden}, e.randn(c.E*c.hidden, 0.2)))
		ex := func(name string, out, in int) wpair {
			return e.weight(c.k.host(name, []int{c.E, out, in}, e.randn(c.E*out*in, 0.1)))
		}
		g, u, d := ex("gate", c.inter, c.hidden), ex("up", c.inter, c.hidden), ex("down", c.hidden, c.inter)
		e.simpleStep(c.T)
		x := e.input(c.T, c.hidden, e.randn(c.T*c.hidden, 1))
		name := fmt.Sprintf("MoE/%s/E%d/%dx%d/router=%s/top%d/renorm=%v/T%d", c.k, c.E, c.hidden, c.inter, c.router, c.topk, c.renorm, c.T)
		if c.norm {
			nw := e.weight(denseHost("norm", []int{c.hidden}, e.randn(c.hidden, 1), tensor.BF16))
			xn := e.poisoned(c.T, c.hidden)
			e.test.RMSNorm(xn.a, x.a, nw.a, 1e-6)
			e.ref.RMSNorm(xn.b, x.b, nw.b, 1e-6)
			x = xn
		}
		out := e.poisoned(c.T, c.hidden)
		p := backend.MoEParams{TopK: c.topk, Renorm: c.renorm, Act: c.act}
		e.test.MoE(out.a, x.a, router.a, backend.Experts{Gate: g.a, Up: u.a, Down: d.a}, p)
		e.ref.MoE(out.b, x.b, router.b, backend.Experts{Gate: g.b, Up: u.b, Down: d.b}, p)
		e.check(name, out, c.T)
		if c.norm {
			e.check(name+"/norm", x, c.T)
		}
	}
}

// scatteredTables deals the first used of a random permutation of nblocks
// KV blocks round-robin to three sequences: block tables that are neither
// contiguous nor ordered, so paging mistakes show.
func (e *env) scatteredTables(nblocks, used int) [][]int32 {
	perm := e.rng.Perm(nblocks)
	tables := [][]int32{{}, {}, {}}
	for i, blk := range perm[:used] {
		tables[i%3] = append(tables[i%3], int32(blk))
	}
	return tables
}
