package cpu

import (
	"math"

	"github.com/mlxcel/mlxcel/internal/backend"
)

func (b *Backend) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32) {
	d, s := dst.(*Tensor), x.(*Tensor)
	var g []float32
	if w != nil {
		g = w.(*weight).dense
	}
	b.parallel(s.rows, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			in, out := s.Row(r), d.Row(r)
			var ss float64
			for _, v := range in {
				ss += float64(v) * float64(v)
			}
			inv := float32(1 / math.Sqrt(ss/float64(len(in))+float64(eps)))
			if g == nil {
				for i, v := range in {
					out[i] = v * inv
				}
				continue
			}
			for i, v := range in {
				out[i] = v * inv * g[i]
			}
		}
	})
}

func (b *Backend) ApplyRoPE(x backend.Tensor, heads, headDim int, r backend.RoPE) {
	t := x.(*Tensor)
	half := r.RotaryDim / 2
	scale := r.Scale
	if scale == 0 {
		scale = 1
	}
	pos := b.step.Positions
	b.parallel(t.rows, 16, func(lo, hi int) {
		cos := make([]float32, half)
		sin := make([]float32, half)
		for row := lo; row < hi; row++ {
			p := float64(pos[row])
			for i := range half {
				s, c := math.Sincos(p * float64(r.InvFreq[i]))
				cos[i], sin[i] = float32(c)*scale, float32(s)*scale
			}
			data := t.Row(row)
			for h := range heads {
				v := data[h*headDim : h*headDim+r.RotaryDim]
				for i := range half {
					x1, x2 := v[i], v[i+half]
					v[i] = x1*cos[i] - x2*sin[i]
					v[i+half] = x2*cos[i] + x1*sin[i]
				}
			}
		}
	})
}

func (b *Backend) GatedAct(dst, gate, up backend.Tensor, act backend.Activation) {
	d, g, u := dst.(*Tensor), gate.(*Tensor), up.(*Tensor)
	if act == backend.Sigmoid && g.cols == 1 && u.cols > 1 {
		// A per-row gate (Qwen's shared-expert gate): dst may alias up.
		for r := range u.rows {
			s := float32(1 / (1 + math.Exp(-float64(g.d[r]))))
			dr, ur := d.Row(r), u.Row(r)
			for i, x := range ur {
				dr[i] = s * x
			}
		}
		return
	}
	n := g.rows * g.cols
	b.parallel(n, 4096, func(lo, hi int) { gatedAct(d.d[lo:hi], g.d[lo:hi], u.d[lo:hi], act) })
}

func gatedAct(d, g, u []float32, act backend.Activation) {
	switch act {
	case backend.SiLU:
		if useAsm {
			// Vector exp (attn_amd64.s), relative error ~1e-7. The tail
			// goes through the same kernel from a padded copy: a value
			// must not round differently by where it falls in the
			// tensor, or a token's result would depend on what it is
			// batched with.
			n := len(g) &^ 7
			if n > 0 {
				siluMul(&d[0], &g[0], &u[0], n)
			}
			if t := len(g) - n; t > 0 {
				var tg, tu [8]float32
				copy(tg[:], g[n:])
				copy(tu[:], u[n:])
				siluMul(&tg[0], &tg[0], &tu[0], 8)
				copy(d[n:], tg[:t])
			}
			return
		}
		for i, x := range g {
			d[i] = x / (1 + float32(math.Exp(float64(-x)))) * u[i]
		}
	case backend.GELUTanh:
		const c = 0.7978845608028654 // sqrt(2/pi)
		for i, x := range g {
			x64 := float64(x)
			d[i] = float32(0.5*x64*(1+math.Tanh(c*(x64+0.044715*x64*x64*x64)))) * u[i]
		}
	case backend.GELU:
		for i, x := range g {
			x64 := float64(x)
			d[i] = float32(0.5*x64*(1+math.Erf(x64/math.Sqrt2))) * u[i]
		}
	case backend.Sigmoid:
		for i, x := range g {
			d[i] = float32(1/(1+math.Exp(-float64(x)))) * u[i]
		}
	case backend.SwiGLUClamped:
		panic("cpu: SwiGLUClamped needs MoEParams' alpha and limit (MoE only)")
	default:
		panic("cpu: unknown activation")
	}
}

// swigluClamped is gpt-oss's expert activation (transformers
// GptOssExperts): gate clamped from above at limit, up to [-limit, limit],
// out = gate*sigmoid(alpha*gate) * (up+1). dst may alias gate.
func swigluClamped(d, g, u []float32, alpha, limit float32) {
	for i, x := range g {
		x = min(x, limit)
		up := min(max(u[i], -limit), limit)
		d[i] = x / (1 + float32(math.Exp(float64(-alpha*x)))) * (up + 1)
	}
}

func (b *Backend) Add(dst, a, c backend.Tensor) {
	d, x, y := dst.(*Tensor), a.(*Tensor), c.(*Tensor)
	n := x.rows * x.cols
	for i := range n {
		d.d[i] = x.d[i] + y.d[i]
	}
}

func (b *Backend) Scale(x backend.Tensor, s float32) {
	t := x.(*Tensor)
	for i := range t.rows * t.cols {
		t.d[i] *= s
	}
}

func (b *Backend) Softcap(x backend.Tensor, c float32) {
	t := x.(*Tensor)
	for i := range t.rows * t.cols {
		t.d[i] = c * float32(math.Tanh(float64(t.d[i]/c)))
	}
}
