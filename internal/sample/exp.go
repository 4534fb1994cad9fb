package sample

import "math"

// An exp for arguments <= 0, written out in the loops below because it is
// where sampling spends its time: every full-distribution step needs one
// exponential per vocabulary entry (262144 for Gemma 3). math.Exp is not
// inlined and carries a long polynomial for full float64 accuracy; the
// results here are stored as float32, so this uses the table method
// e^x = 2^n * 2^(j/64) * e^r with |r| <= ln2/128, where a quadratic is
// already below float32 resolution (max relative error ~8e-8, checked in the
// tests). The arithmetic is float64 so that one multiply-subtract gives an
// exact enough r, and the rounding of x*64/ln2 to an integer k is the
// "add 1.5*2^52" trick, which leaves k in the low mantissa bits and avoids
// int<->float conversions. About 2x faster than calling math.Exp.
//
// Everything below -expCutoff underflows float32 and is returned as 0; so are
// NaN and -Inf, which is how masked tokens drop out.

const (
	expCutoff = 87.3 // e^-87.3 is just above the smallest normal float32
	log2e64   = 64 * 1.44269504088896340736
	ln2by64   = 0.69314718055994530942 / 64
	shifter   = 0x1.8p52 // adding it rounds to an integer kept in the low bits
)

// exp2Tab[j] holds the float64 bits of 2^(j/64).
var exp2Tab = func() (t [64]uint64) {
	for j := range t {
		t[j] = math.Float64bits(math.Exp2(float64(j) / 64))
	}
	return t
}()

// expNeg returns e^x for x <= 0 (0 for x < -87.3, -Inf and NaN). It is the
// scalar twin of the loops below and must stay bit-identical to them (a
// test checks). exp(0) is exactly 1, which min-p relies on.
func expNeg(xd float64) float32 {
	if !(xd >= -expCutoff) {
		return 0
	}
	t := xd*log2e64 + shifter
	kb := math.Float64bits(t) // low bits: k = round(x*64/ln2), two's complement
	r := xd - (t-shifter)*ln2by64
	p := 1 + r + r*r*0.5
	// 2^(k/64) = 2^(k&63 / 64) * 2^(k>>6); the shift of kb drops the
	// shifter's own exponent bits, leaving floor(k/64) in the exponent field.
	return float32(p * math.Float64frombits(exp2Tab[kb&63]+(kb>>6)<<52))
}

// expStore writes e_i = exp((src_i - m) * scale) to dst, zeroing those below
// floor, and returns the float64 sum of what it wrote (of the stored float32
// values, so that sampling by cumulative sums over dst hits exactly this
// total). m must be >= every src_i (the caller passes the max) so that the
// exponent is <= 0.
func expStore(dst, src []float32, m float32, scale float64, floor float32) float64 {
	dst = dst[:len(src)]
	md := float64(m)
	var sum float64
	for i, v := range src {
		// float64 makes v - m exact; in float32 it could be off by half an
		// ulp of m, i.e. 1e-6 relative in e^x for logits around 20.
		xd := (float64(v) - md) * scale
		var e float32
		if xd >= -expCutoff { // false for NaN and -Inf
			t := xd*log2e64 + shifter
			kb := math.Float64bits(t)
			r := xd - (t-shifter)*ln2by64
			p := 1 + r + r*r*0.5
			e = float32(p * math.Float64frombits(exp2Tab[kb&63]+(kb>>6)<<52))
			if e < floor {
				e = 0
			}
		}
		dst[i] = e
		sum += float64(e)
	}
	return sum
}

// Histogram of probabilities for top-p: bucket b holds the mass of the
// e_i in [0, 1] whose float32 bits satisfy (bits(1) - bits(e)) >> 21 == b,
// i.e. quarter-octave buckets from the top (b = 0 holds e in (0.84, 1]).
// Bucketing by bit pattern is exact and monotone, so "all buckets <= B" is
// always a prefix of the tokens in probability order. e = 0 lands in 508.
const (
	oneBits     = 0x3F800000
	bucketShift = 21
	nBuckets    = 512 // power of two so the index mask removes bounds checks
)

func bucketOf(e float32) uint32 {
	return (oneBits - math.Float32bits(e)) >> bucketShift
}

// histogram has four interleaved copies, element i going to copy i&3:
// most of a vocabulary falls into a handful of deep buckets, and with a
// single copy consecutive read-modify-writes of the same slot serialise on
// store-to-load forwarding, which made the histogram pass twice as slow.
type histogram [4][nBuckets]float64

// mass returns the total of bucket b over the four copies.
func (h *histogram) mass(b int) float64 {
	return (h[0][b] + h[1][b]) + (h[2][b] + h[3][b])
}

// expStoreHist is expStore without a floor that also accumulates the
// per-bucket mass into hist (which the caller has zeroed).
func expStoreHist(dst, src []float32, m float32, scale float64, hist *histogram) float64 {
	dst = dst[:len(src)]
	md := float64(m)
	var sum float64
	for i, v := range src {
		xd := (float64(v) - md) * scale
		var e float32
		if xd >= -expCutoff {
			t := xd*log2e64 + shifter
			kb := math.Float64bits(t)
			r := xd - (t-shifter)*ln2by64
			p := 1 + r + r*r*0.5
			e = float32(p * math.Float64frombits(exp2Tab[kb&63]+(kb>>6)<<52))
		}
		dst[i] = e
		hist[i&3][bucketOf(e)&(nBuckets-1)] += float64(e)
		sum += float64(e)
	}
	return sum
}

// expSum returns sum_i exp(src_i - m) without storing anything; it is the
// log-sum-exp pass for raw logprobs.
func expSum(src []float32, m float32) float64 {
	md := float64(m)
	var sum float64
	for _, v := range src {
		xd := float64(v) - md
		if xd >= -expCutoff {
			t := xd*log2e64 + shifter
			kb := math.Float64bits(t)
			r := xd - (t-shifter)*ln2by64
			p := 1 + r + r*r*0.5
			// Nothing is stored, so keep full float64 precision.
			sum += p * math.Float64frombits(exp2Tab[kb&63]+(kb>>6)<<52)
		}
	}
	return sum
}
