package backendtest

import (
	"fmt"
	"math"
	"slices"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

func init() {
	register("DecodeLayer", runDecodeLayer)
}

// runDecodeLayer drives whole pre-norm transformer layers in the order the
// model code issues their ops (norm, q/k/v, optional per-head q/k norms,
// RoPE, attention, o projection, residual add, norm, gate/up, gated
// activation, down projection, residual add) through a prefill step and
// decode steps of one and two tokens, two layers per step (so one layer's
// last residual add meets the next layer's norm), with a gated MLP or a
// routed MoE. A backend that folds ops into their neighbours at decode
// time (a norm into the projection that reads it, the residual add into
// the projection or expert sum before it, q/k norms and RoPE into the
// attention) is checked on every tensor the separate ops leave behind.
func runDecodeLayer(e *env) {
	for _, c := range []struct {
		k                      wkind
		hidden, heads, kvh, hd int
		inter                  int
		qkNorm, moe            bool
	}{
		{wkind{tensor.BF16, 4, 64}, 256, 4, 2, 64, 384, false, false},
		{wkind{tensor.BF16, 4, 64}, 512, 8, 2, 128, 768, true, false},
		{wkind{tensor.F16, 8, 32}, 256, 4, 1, 64, 320, true, false},
		{wkind{tensor.BF16, 4, 64}, 256, 8, 2, 64, 128, true, true},
	} {
		p := backend.AttnParams{Heads: c.heads, KVHeads: c.kvh, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd)))}
		qd, kd := c.heads*c.hd, c.kvh*c.hd
		lin := func(name string, out, in int) wpair {
			return e.weight(c.k.host(name, []int{out, in}, e.randn(out*in, 1/math.Sqrt(float64(in)))))
		}
		wq, wk, wv, wo := lin("q", qd, c.hidden), lin("k", kd, c.hidden), lin("v", kd, c.hidden), lin("o", c.hidden, qd)
		wg, wu, wd := lin("g", c.inter, c.hidden), lin("u", c.inter, c.hidden), lin("d", c.hidden, c.inter)
		const E, topk = 8, 2
		ex := func(name string, out, in int) wpair {
			return e.weight(c.k.host(name, []int{E, out, in}, e.randn(E*out*in, 1/math.Sqrt(float64(in)))))
		}
		// Router logits of O(1), as trained routers give: at scale 0.5 they
		// reached ~8 (std), where the top-2 softmax turns the 3e-3 f16
		// rounding carried from attention into 1e-2 on the MoE output
		// (one seed in ~15 on the H200 crossed the bound).
		routerData := e.randn(E*c.hidden, 0.1)
		router := e.weight(denseHost("router", []int{E, c.hidden}, routerData, tensor.BF16))
		eg, eu, ed := ex("eg", c.inter, c.hidden), ex("eu", c.inter, c.hidden), ex("ed", c.hidden, c.inter)
		vec := func(name string, n int) wpair {
			x := e.randn(n, 0.2)
			for i := range x {
				x[i] += 1
			}
			return e.weight(denseHost(name, []int{n}, x, tensor.BF16))
		}
		n1, n2, qn, kn := vec("n1", c.hidden), vec("n2", c.hidden), vec("qn", c.hd), vec("kn", c.hd)
		inv := make([]float32, c.hd/2)
		for i := range inv {
			inv[i] = float32(math.Pow(1e6, -2*float64(i)/float64(c.hd)))
		}
		rope := backend.RoPE{InvFreq: inv, RotaryDim: c.hd, Scale: 1}
		spec := backend.KVSpec{NumBlocks: 16, BlockSize: 16,
			Layers: []backend.KVLayer{{KVHeads: c.kvh, HeadDim: c.hd}, {KVHeads: c.kvh, HeadDim: c.hd}}}
		kva, kvb := e.kvStores(spec)
		tables := [][]int32{{5, 2, 7}, {0, 6, 3}} // blocks of both layers' caches
		lens := []int{0, 0}
		tiedBefore := false // a near-tie at layer 0 of an earlier step reached the KV of layer 1
		for si, plan := range [][]int{{21, 9}, {1, 0}, {0, 1}, {1, 1}, {1, 0}} {
			if tiedBefore {
				break
			}
			T := e.planStep(plan, tables, lens)
			// The last two steps let the backend leave q and k unwritten
			// (ScratchQK), as the model does; they are not compared there.
			ps := p
			ps.ScratchQK = si >= 3
			x := e.input(T, c.hidden, e.randn(T*c.hidden, 1))
			h, o := e.poisoned(T, c.hidden), e.poisoned(T, c.hidden)
			q, k, v, att := e.poisoned(T, qd), e.poisoned(T, kd), e.poisoned(T, kd), e.poisoned(T, qd)
			g, u := e.poisoned(T, c.inter), e.poisoned(T, c.inter)
			hAttn := e.poisoned(T, c.hidden)
			margins := [2]float64{math.Inf(1), math.Inf(1)}
			for i, be := range []backend.Backend{e.test, e.ref} {
				pick := func(p pair) backend.Tensor { return []backend.Tensor{p.a, p.b}[i] }
				pw := func(p wpair) backend.Weight { return []backend.Weight{p.a, p.b}[i] }
				kv := []backend.KVStore{kva, kvb}[i]
				for layer := range 2 {
					be.RMSNorm(pick(hAttn), pick(x), pw(n1), 1e-6)
					be.Linear(pick(q), pick(hAttn), pw(wq), nil)
					be.Linear(pick(k), pick(hAttn), pw(wk), nil)
					be.Linear(pick(v), pick(hAttn), pw(wv), nil)
					if c.qkNorm {
						qv := be.View(pick(q), T*c.heads, c.hd)
						be.RMSNorm(qv, qv, pw(qn), 1e-6)
						kvv := be.View(pick(k), T*c.kvh, c.hd)
						be.RMSNorm(kvv, kvv, pw(kn), 1e-6)
					}
					be.ApplyRoPE(pick(q), c.heads, c.hd, rope)
					be.ApplyRoPE(pick(k), c.kvh, c.hd, rope)
					be.Attention(pick(att), pick(q), pick(k), pick(v), kv, layer, ps)
					be.Linear(pick(o), pick(att), pw(wo), nil)
					be.Add(pick(x), pick(x), pick(o))
					be.RMSNorm(pick(h), pick(x), pw(n2), 1e-6)
					if c.moe && i == 1 {
						margins[layer] = routingMargin(e.ref, pick(h), routerData, E, c.hidden, topk, T)
					}
					if c.moe {
						be.MoE(pick(o), pick(h), pw(router), backend.Experts{Gate: pw(eg), Up: pw(eu), Down: pw(ed)},
							backend.MoEParams{TopK: topk, Renorm: true, Act: backend.SiLU})
					} else {
						be.Linear(pick(g), pick(h), pw(wg), nil)
						be.Linear(pick(u), pick(h), pw(wu), nil)
						be.GatedAct(pick(g), pick(g), pick(u), backend.SiLU)
						be.Linear(pick(o), pick(g), pw(wd), nil)
					}
					be.Add(pick(x), pick(x), pick(o))
				}
			}
			name := fmt.Sprintf("DecodeLayer/%s/d%d/h%d/kv%d/qknorm=%v/moe=%v/step%d", c.k, c.hd, c.heads, c.kvh, c.qkNorm, c.moe, si)
			type named struct {
				name string
				p    pair
			}
			checks := []named{{"norm1", hAttn}, {"v", v}, {"att", att}, {"norm2", h}, {"down", o}, {"residual", x}}
			if !ps.ScratchQK {
				checks = append(checks, named{"q", q}, named{"k", k})
			}
			if !c.moe {
				checks = append(checks, named{"act", g}, named{"up", u})
			}
			// A token whose k-th and (k+1)-th router logits nearly tie may
			// pick another expert on the backend under test (its MoE input
			// differs from the reference's by ~1e-4 in the logits): the MoE
			// output is then not comparable, nor anything after it. A tie
			// at layer 1 spoils that step's MoE output and residual; at
			// layer 0, all of layer 1 (every tensor checked is layer 1's)
			// and, through its KV, the later steps.
			const tieMargin = 2e-3 // ~20x the CUDA backend's logit error: s18g's flip came at a gap of 1.2e-4
			switch {
			case margins[0] < tieMargin:
				e.t.Logf("%s: router near-tie at layer 0 (top-%d margin %.2g): this step and the case's later steps not compared", name, topk, margins[0])
				checks, tiedBefore = nil, true
			case margins[1] < tieMargin:
				e.t.Logf("%s: router near-tie at layer 1 (top-%d margin %.2g): down and residual not compared", name, topk, margins[1])
				checks = slices.DeleteFunc(checks, func(n named) bool { return n.name == "down" || n.name == "residual" })
			}
			for _, t := range checks {
				e.check(name+"/"+t.name, t.p, T)
			}
		}
	}
}

// routingMargin is the smallest gap, over the T rows of h read from ref,
// between the topk-th and the next router logit (router: E x hidden, as
// the backends hold it in bf16).
func routingMargin(ref backend.Backend, h backend.Tensor, router []float32, E, hidden, topk, T int) float64 {
	x := make([]float32, T*hidden)
	ref.ReadRows(h, x)
	margin := math.Inf(1)
	logits := make([]float64, E)
	for t := range T {
		for ex := range E {
			var acc float64
			for j := range hidden {
				acc += float64(tensor.BF16ToF32(tensor.F32ToBF16(router[ex*hidden+j]))) * float64(x[t*hidden+j])
			}
			logits[ex] = acc
		}
		slices.Sort(logits)
		margin = min(margin, logits[E-topk]-logits[E-topk-1])
	}
	return margin
}
