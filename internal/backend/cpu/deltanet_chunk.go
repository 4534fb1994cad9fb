package cpu

import "math"

// deltaChunk is one value head's chunk of L positions of the gated delta
// rule in matrix form (transformers' torch_chunk_gated_delta_rule, the
// "UT transform" of the DeltaNet paper). With c the cumulative log decay
// inside the chunk and D[i][j] = exp(c_i - c_j) for j <= i:
//
//	T     = (I + strict_lower(diag(beta) K K^T ∘ D))^-1      (forward substitution)
//	U     = T diag(beta) V,   W = T diag(beta exp(c)) K
//	Vnew  = U - W S
//	Y     = diag(exp(c)) Q S + lower(Q K^T ∘ D) Vnew
//	S'    = exp(c_L) S + (diag(exp(c_L - c)) K)^T Vnew
//
// which equals running the one-token recurrence over the chunk.
type deltaChunk struct {
	L, kd, vd  int
	q, k, v, y [][]float32 // per position: views into the layer's rows
	g, beta    []float32
	cum        []float32
	u, vnew    []float32 // [L, vd]
	w          []float32 // [L, kd]
	mem        []float32 // [vd]: the one-token step's k·S
}

func (c *deltaChunk) reset(L, kd, vd int) {
	c.L, c.kd, c.vd = L, kd, vd
	c.q, c.k, c.v, c.y = grow(c.q, L), grow(c.k, L), grow(c.v, L), grow(c.y, L)
	c.g, c.beta, c.cum = grow(c.g, L), grow(c.beta, L), grow(c.cum, L)
	c.u, c.vnew, c.w = grow(c.u, L*vd), grow(c.vnew, L*vd), grow(c.w, L*kd)
}

func dot(a, b []float32) float32 {
	var s float32
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

// run advances S [kd, vd] over the chunk and writes its outputs.
func (c *deltaChunk) run(S []float32) {
	L, kd, vd := c.L, c.kd, c.vd
	var acc float32
	for i := range L {
		acc += c.g[i]
		c.cum[i] = acc
	}
	decay := func(i, j int) float32 { return float32(math.Exp(float64(c.cum[i] - c.cum[j]))) }
	// The UT system, solved row by row: row i of U and W less the earlier
	// rows weighted by the system's entries.
	for i := range L {
		u, w := c.u[i*vd:(i+1)*vd], c.w[i*kd:(i+1)*kd]
		bi := c.beta[i]
		ec := float32(math.Exp(float64(c.cum[i])))
		for j, x := range c.v[i] {
			u[j] = bi * x
		}
		for j, x := range c.k[i] {
			w[j] = bi * ec * x
		}
		for j := range i {
			e := bi * dot(c.k[i], c.k[j]) * decay(i, j)
			uj, wj := c.u[j*vd:(j+1)*vd], c.w[j*kd:(j+1)*kd]
			for d := range u {
				u[d] -= e * uj[d]
			}
			for d := range w {
				w[d] -= e * wj[d]
			}
		}
	}
	// Vnew = U - W S: the part of each value the carried state does not
	// already predict.
	for i := range L {
		vn, w := c.vnew[i*vd:(i+1)*vd], c.w[i*kd:(i+1)*kd]
		copy(vn, c.u[i*vd:(i+1)*vd])
		for d, wd := range w {
			row := S[d*vd : (d+1)*vd]
			for j, s := range row {
				vn[j] -= wd * s
			}
		}
	}
	// Outputs: the decayed read of the carried state plus the chunk's own
	// causal attention over Vnew.
	for i := range L {
		y, q := c.y[i], c.q[i]
		clear(y)
		for d, qd := range q {
			row := S[d*vd : (d+1)*vd]
			for j, s := range row {
				y[j] += qd * s
			}
		}
		ec := float32(math.Exp(float64(c.cum[i])))
		for j := range y {
			y[j] *= ec
		}
		for j := 0; j <= i; j++ {
			e := dot(q, c.k[j]) * decay(i, j)
			vn := c.vnew[j*vd : (j+1)*vd]
			for d := range y {
				y[d] += e * vn[d]
			}
		}
	}
	// The state at the chunk's end.
	last := L - 1
	eL := float32(math.Exp(float64(c.cum[last])))
	for i := range S {
		S[i] *= eL
	}
	for t := range L {
		e := decay(last, t)
		vn := c.vnew[t*vd : (t+1)*vd]
		for d, kv := range c.k[t] {
			f := kv * e
			row := S[d*vd : (d+1)*vd]
			for j := range row {
				row[j] += f * vn[j]
			}
		}
	}
}
