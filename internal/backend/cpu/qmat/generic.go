package qmat

// The pure-Go path: every bit width, and 4/8 bits where the assembly
// kernels are unavailable. Per group it uses
//
//	dot(x_g, w_g) = scale*dot(x_g, q_g) + bias*sum(x_g)
//
// with sum(x_g) computed once per call (prep.gsum), and decodes each group
// of weights once for all activation rows.

// decodeGroup unpacks len(dst) quantized values from src as float32.
// Groups start on word boundaries (group*bits is a multiple of 32), so a
// group's bytes can be decoded on their own.
func decodeGroup(dst []float32, src []byte, bits int) {
	switch bits {
	case 8:
		for i, b := range src[:len(dst)] {
			dst[i] = float32(b)
		}
	case 4:
		src = src[:len(dst)/2]
		for i, b := range src {
			dst[2*i] = float32(b & 15)
			dst[2*i+1] = float32(b >> 4)
		}
	case 2:
		src = src[:len(dst)/4]
		for i, b := range src {
			dst[4*i] = float32(b & 3)
			dst[4*i+1] = float32(b >> 2 & 3)
			dst[4*i+2] = float32(b >> 4 & 3)
			dst[4*i+3] = float32(b >> 6)
		}
	default:
		// 3, 5, 6 bits: values straddle bytes; feed bytes LSB-first into
		// a bit buffer and peel values off its bottom.
		var buf uint32
		var have uint
		mask := uint32(1)<<bits - 1
		j := 0
		for _, b := range src {
			buf |= uint32(b) << have
			have += 8
			for have >= uint(bits) && j < len(dst) {
				dst[j] = float32(buf & mask)
				buf >>= uint(bits)
				have -= uint(bits)
				j++
			}
		}
	}
}

// dot is a 4-way unrolled float32 dot product (independent partial sums
// keep the adds pipelined).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func (m *Matrix) mulRangeGo(p *prep, out []float32, o0, o1 int) {
	var qbuf [128]float32
	q := qbuf[:m.Group]
	acc := make([]float32, p.nRows)
	gb := m.Group * m.Bits / 8
	for o := o0; o < o1; o++ {
		clear(acc)
		row := m.packed[o*m.rowBytes : (o+1)*m.rowBytes]
		for g := 0; g < m.groups; g++ {
			s, b := m.scaleBias(o, g)
			decodeGroup(q, row[g*gb:(g+1)*gb], m.Bits)
			for r := range acc {
				xg := p.x[r*m.In+g*m.Group:]
				acc[r] += s*dot(q, xg[:m.Group]) + b*p.gsum[r*m.groups+g]
			}
		}
		for r, v := range acc {
			out[r*m.Out+o] = v
		}
	}
}
