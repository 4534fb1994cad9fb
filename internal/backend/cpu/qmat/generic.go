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

// Dot is a 4-way unrolled float32 dot product (independent partial sums
// keep the adds pipelined); the CPU backend's dense paths share it.
func Dot(a, b []float32) float32 {
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

// dotQ4 is dot(x, q) for 4-bit values packed in src (len(x) = 2*len(src),
// len(src) a multiple of 8 — every group is), decoding on the fly: with a
// single activation row a separate decode pass would cost as much as the
// dot itself. Array pointers leave one bounds check per 16 weights.
func dotQ4(x []float32, src []byte) float32 {
	var s0, s1, s2, s3 float32
	for i := 0; i+8 <= len(src); i += 8 {
		b := (*[8]byte)(src[i:])
		v := (*[16]float32)(x[2*i:])
		s0 += v[0]*float32(b[0]&15) + v[4]*float32(b[2]&15) + v[8]*float32(b[4]&15) + v[12]*float32(b[6]&15)
		s1 += v[1]*float32(b[0]>>4) + v[5]*float32(b[2]>>4) + v[9]*float32(b[4]>>4) + v[13]*float32(b[6]>>4)
		s2 += v[2]*float32(b[1]&15) + v[6]*float32(b[3]&15) + v[10]*float32(b[5]&15) + v[14]*float32(b[7]&15)
		s3 += v[3]*float32(b[1]>>4) + v[7]*float32(b[3]>>4) + v[11]*float32(b[5]>>4) + v[15]*float32(b[7]>>4)
	}
	return (s0 + s1) + (s2 + s3)
}

// dotQ8 is dot(x, q) for 8-bit values in src (len a multiple of 8).
func dotQ8(x []float32, src []byte) float32 {
	var s0, s1, s2, s3 float32
	for i := 0; i+8 <= len(src); i += 8 {
		b := (*[8]byte)(src[i:])
		v := (*[8]float32)(x[i:])
		s0 += v[0]*float32(b[0]) + v[4]*float32(b[4])
		s1 += v[1]*float32(b[1]) + v[5]*float32(b[5])
		s2 += v[2]*float32(b[2]) + v[6]*float32(b[6])
		s3 += v[3]*float32(b[3]) + v[7]*float32(b[7])
	}
	return (s0 + s1) + (s2 + s3)
}

func (m *Matrix) mulRangeGo(p *prep, out []float32, o0, o1 int) {
	if p.nRows == 1 && (m.Bits == 4 || m.Bits == 8) {
		m.mulRangeGo1(p, out, o0, o1)
		return
	}
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
				acc[r] += s*Dot(q, xg[:m.Group]) + b*p.gsum[r*m.groups+g]
			}
		}
		for r, v := range acc {
			out[r*m.Out+o] = v
		}
	}
}

// mulRangeGo1 is mulRangeGo for one activation row at 4 or 8 bits.
func (m *Matrix) mulRangeGo1(p *prep, out []float32, o0, o1 int) {
	gb := m.Group * m.Bits / 8
	x := p.x[:m.In]
	for o := o0; o < o1; o++ {
		row := m.packed[o*m.rowBytes : (o+1)*m.rowBytes]
		var acc float32
		for g := 0; g < m.groups; g++ {
			s, b := m.scaleBias(o, g)
			xg := x[g*m.Group : (g+1)*m.Group]
			var d float32
			if m.Bits == 4 {
				d = dotQ4(xg, row[g*gb:(g+1)*gb])
			} else {
				d = dotQ8(xg, row[g*gb:(g+1)*gb])
			}
			acc += s*d + b*p.gsum[g]
		}
		out[o] = acc
	}
}
