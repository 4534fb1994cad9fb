package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// Gated DeltaNet (backend.DeltaNetBackend), following transformers'
// modeling_qwen3_5.py: causal_conv1d_fn / causal_conv1d_update for the
// conv, torch_chunk_gated_delta_rule for a sequence's chunk of several
// tokens, torch_recurrent_gated_delta_rule for a single token. All math is
// float32 as the reference runs it; scalars (gates, norms) in float64.

// deltaState is a recurrent layer's state in the store: per slot the last
// ConvKernel-1 conv inputs then VHeads [KDim, VDim] matrices, and the
// positions each slot has absorbed (to catch a chunk that does not
// continue its sequence).
type deltaState struct {
	p     backend.DeltaNetParams
	data  []float32 // (Slots + Snapshots) * StateFloats
	pos   []int32   // per slot and snapshot place
	slots int
}

// newDeltaState makes layer's state of floats values (kvLayout's).
func newDeltaState(spec backend.KVSpec, l backend.KVLayer, layer, floats int) (*deltaState, error) {
	p := l.DeltaNet
	if spec.Slots <= 0 {
		return nil, fmt.Errorf("cpu: layer %d keeps recurrent state per slot, but the KV spec has no slots", layer)
	}
	if p.KHeads <= 0 || p.VHeads%p.KHeads != 0 || p.KDim <= 0 || p.VDim <= 0 || p.ConvKernel < 1 || p.ChunkSize < 1 {
		return nil, fmt.Errorf("cpu: layer %d: invalid Gated DeltaNet shape %+v", layer, p)
	}
	return &deltaState{p: p, data: make([]float32, floats), pos: make([]int32, spec.Slots+spec.Snapshots), slots: spec.Slots}, nil
}

// slot returns the conv window [ConvKernel-1, Channels] and the delta-rule
// matrices of one slot.
func (d *deltaState) slot(i int) (conv, s []float32) {
	n := d.p.StateFloats()
	all := d.data[i*n : (i+1)*n]
	c := (d.p.ConvKernel - 1) * d.p.Channels()
	return all[:c], all[c:]
}

func (b *Backend) GatedDeltaNet(dst, qkv, a, bt backend.Tensor, w backend.DeltaNetWeights, kv backend.KVStore, layer int, p backend.DeltaNetParams) {
	st := kv.(*kvStore)
	ds := st.delta[layer]
	if ds == nil || ds.p != p {
		panic(fmt.Sprintf("cpu: layer %d has no Gated DeltaNet state of shape %+v", layer, p))
	}
	out, in, at, btt := dst.(*Tensor), qkv.(*Tensor), a.(*Tensor), bt.(*Tensor)
	C, K := p.Channels(), p.ConvKernel
	if in.cols != C || out.cols != p.VHeads*p.VDim || at.cols != p.VHeads || btt.cols != p.VHeads {
		panic("cpu: GatedDeltaNet tensor widths do not match its parameters")
	}
	conv := w.Conv.(*weight).dense
	alog, dtb := w.ALog.(*weight).dense, w.DtBias.(*weight).dense
	if len(conv) != C*K || len(alog) != p.VHeads || len(dtb) != p.VHeads {
		panic("cpu: GatedDeltaNet weights do not match its parameters")
	}
	step := b.step
	n, hv := in.rows, p.VHeads
	sc := deltaPool.Get().(*deltaScratch)
	defer deltaPool.Put(sc)
	sc.x, sc.g, sc.beta = grow(sc.x, n*C), grow(sc.g, n*hv), grow(sc.beta, n*hv)
	sc.used = grow(sc.used, ds.slots)
	clear(sc.used)
	sc.states = sc.states[:0]
	for i := range step.Seqs {
		s := &step.Seqs[i]
		if s.Slot < 0 || s.Slot >= ds.slots || sc.used[s.Slot] {
			panic(fmt.Sprintf("cpu: sequence slot %d is out of [0, %d) or used twice in one step", s.Slot, ds.slots))
		}
		sc.used[s.Slot] = true
		cs, S := ds.slot(s.Slot)
		first := step.Positions[s.Start]
		switch {
		case first == 0:
			clear(cs)
			clear(S)
		case first != ds.pos[s.Slot]:
			// Reading the state of other positions would silently mix
			// sequences: the engine turns the panic into an error.
			panic(fmt.Sprintf("cpu: layer %d: a chunk at position %d, but slot %d's state holds %d positions", layer, first, s.Slot, ds.pos[s.Slot]))
		}
		ds.pos[s.Slot] = first + int32(s.Len)
		sc.buf = grow(sc.buf, (K-1+s.Len)*C)
		convSiLU(sc.x[s.Start*C:(s.Start+s.Len)*C], in.d[s.Start*C:(s.Start+s.Len)*C], cs, conv, sc.buf, s.Len, C, K)
		sc.states = append(sc.states, S)
	}
	deltaGates(sc.g, sc.beta, at.d, btt.d, alog, dtb, n, hv)
	normQK(sc.x, n, p)
	// One task per (sequence, value head): heads of one sequence and the
	// sequences of a decode batch spread over the workers alike.
	hs := p.KDim * p.VDim
	b.parallel(len(step.Seqs)*hv, 1, func(lo, hi int) {
		c := chunkPool.Get().(*deltaChunk)
		defer chunkPool.Put(c)
		for it := lo; it < hi; it++ {
			s, h := &step.Seqs[it/hv], it%hv
			r := s.Start
			deltaHead(out.d[r*out.cols:(r+s.Len)*out.cols], sc.x[r*C:], sc.g[r*hv:], sc.beta[r*hv:],
				sc.states[it/hv][h*hs:(h+1)*hs], h, s.Len, p, c)
		}
	})
}

// deltaScratch is one call's conv outputs and gates; calls take one from
// a pool so a steady decode loop allocates nothing per layer.
type deltaScratch struct {
	x, g, beta, buf []float32
	used            []bool
	states          [][]float32
}

var (
	deltaPool = sync.Pool{New: func() any { return new(deltaScratch) }}
	chunkPool = sync.Pool{New: func() any { return new(deltaChunk) }}
)

// convSiLU writes silu(causal depthwise conv) of the n rows of in (after
// the window's K-1 stored rows) to x, and moves the window to the last
// K-1 inputs. w is [channels][K], tap K-1 on the current input; buf is
// scratch of (K-1+n)*channels.
func convSiLU(x, in, window, w, buf []float32, n, ch, k int) {
	copy(buf, window)
	copy(buf[(k-1)*ch:], in)
	for t := range n {
		row := x[t*ch : (t+1)*ch]
		for c := range row {
			var acc float32
			for j := range k {
				acc += w[c*k+j] * buf[(t+j)*ch+c]
			}
			row[c] = acc / (1 + float32(math.Exp(float64(-acc))))
		}
	}
	copy(window, buf[n*ch:])
}

// deltaGates writes per token and value head the log decay
// g = -exp(A_log) * softplus(a + dt_bias) and beta = sigmoid(b).
func deltaGates(g, beta, a, bv, alog, dtb []float32, n, heads int) {
	for t := range n {
		for h := range heads {
			i := t*heads + h
			g[i] = float32(-math.Exp(float64(alog[h])) * softplus(float64(a[i]+dtb[h])))
			beta[i] = float32(1 / (1 + math.Exp(-float64(bv[i]))))
		}
	}
}

// softplus is torch's: log(1+e^x), x itself above 20.
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// normQK L2-normalises each key head of q and k in the conv output rows
// (transformers' l2norm: x * rsqrt(sum x^2 + 1e-6)) and scales q by
// KDim^-0.5.
func normQK(x []float32, n int, p backend.DeltaNetParams) {
	C, kd := p.Channels(), p.KDim
	qs := float32(1 / math.Sqrt(float64(kd)))
	for t := range n {
		row := x[t*C : t*C+2*p.KHeads*kd]
		for h := range 2 * p.KHeads {
			v := row[h*kd : (h+1)*kd]
			var ss float64
			for _, e := range v {
				ss += float64(e) * float64(e)
			}
			inv := float32(1 / math.Sqrt(ss+1e-6))
			if h < p.KHeads {
				inv *= qs
			}
			for i := range v {
				v[i] *= inv
			}
		}
	}
}

// deltaHead runs value head h over the n tokens of one sequence (rows of
// x, g, beta and o from its first), updating its state S [KDim, VDim] and
// writing its output columns of o; c is scratch.
func deltaHead(o, x, g, beta, S []float32, h, n int, p backend.DeltaNetParams, c *deltaChunk) {
	C, kd, vd := p.Channels(), p.KDim, p.VDim
	kh := h / (p.VHeads / p.KHeads)
	hv := p.VHeads
	q := func(t int) []float32 { return x[t*C+kh*kd : t*C+(kh+1)*kd] }
	k := func(t int) []float32 { return x[t*C+(p.KHeads+kh)*kd : t*C+(p.KHeads+kh+1)*kd] }
	v := func(t int) []float32 {
		off := t*C + 2*p.KHeads*kd + h*vd
		return x[off : off+vd]
	}
	y := func(t int) []float32 { return o[(t*hv+h)*vd : (t*hv+h+1)*vd] }
	if n == 1 {
		c.mem = grow(c.mem, vd)
		deltaStep(y(0), q(0), k(0), v(0), S, c.mem, g[h], beta[h], kd, vd)
		return
	}
	for c0 := 0; c0 < n; c0 += p.ChunkSize {
		L := min(p.ChunkSize, n-c0)
		c.reset(L, kd, vd)
		for i := range L {
			t := c0 + i
			c.q[i], c.k[i], c.v[i], c.y[i] = q(t), k(t), v(t), y(t)
			c.g[i], c.beta[i] = g[t*hv+h], beta[t*hv+h]
		}
		c.run(S)
	}
}

// deltaStep is the one-token recurrence: S *= decay; delta = beta*(v -
// k·S); S += k ⊗ delta; y = q·S. mem is scratch of vd.
func deltaStep(y, q, k, v, S, mem []float32, g, beta float32, kd, vd int) {
	decay := float32(math.Exp(float64(g)))
	clear(mem)
	for i := range kd {
		row := S[i*vd : (i+1)*vd]
		ki := k[i]
		for j := range row {
			row[j] *= decay
			mem[j] += row[j] * ki
		}
	}
	for j := range mem {
		mem[j] = (v[j] - mem[j]) * beta
	}
	clear(y)
	for i := range kd {
		row := S[i*vd : (i+1)*vd]
		ki, qi := k[i], q[i]
		for j, d := range mem {
			row[j] += ki * d
			y[j] += row[j] * qi
		}
	}
}
