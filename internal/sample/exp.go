package sample

import "math"

// A float32 exp for arguments <= 0, written out in the loops below because
// it is where sampling spends its time: every full-distribution step needs
// one exponential per vocabulary entry (262144 for Gemma 3). math.Exp works
// in float64 with a long polynomial and is not inlined; this version uses
// the classic table method e^x = 2^n * 2^(j/64) * e^r, |r| <= ln2/128, where
// a cubic is already accurate to float32 precision (max relative error
// ~2e-7, checked in the tests). It is about 1.5-2x faster than math.Exp.
//
// Everything below -expCutoff underflows float32 and is returned as 0; so are
// NaN and -Inf, which is how masked tokens drop out.

const (
	expCutoff = 87.3 // e^-87.3 is just above the smallest normal float32
	log2e64   = 64 * 1.44269504088896340736
	// ln2/64 split in two so that k*ln2hi is exact in float32 for every k
	// the cutoff allows (|k| < 8100 needs 13 bits; ln2hi has 9).
	ln2hi64 = 0.693359375 / 64
	ln2lo64 = (0.69314718055994530942 - 0.693359375) / 64
)

// exp2Tab[j] holds the float32 bits of 2^(j/64).
var exp2Tab = func() (t [64]uint32) {
	for j := range t {
		t[j] = math.Float32bits(float32(math.Exp2(float64(j) / 64)))
	}
	return t
}()

// expNeg returns e^x for x <= 0 (0 for x < -87.3, -Inf and NaN).
// exp(0) is exactly 1, which min-p relies on.
func expNeg(x float32) float32 {
	if !(x >= -expCutoff) {
		return 0
	}
	// Round x*64/ln2 to the nearest integer; x <= 0 so truncating x-0.5
	// rounds (half away from zero).
	k := int32(x*log2e64 - 0.5)
	fk := float32(k)
	r := x - fk*ln2hi64 - fk*ln2lo64
	p := 1 + r + r*r*(0.5+r*(1.0/6))
	return p * math.Float32frombits(exp2Tab[k&63]+uint32(k>>6)<<23)
}

// expStore writes e_i = exp((src_i - m) * scale) to dst, zeroing those below
// floor, and returns the float64 sum of what it wrote. m must be >= every
// src_i (the caller passes the max) so that the exponent is <= 0.
func expStore(dst, src []float32, m, scale, floor float32) float64 {
	dst = dst[:len(src)]
	// Two accumulators halve the float64 add dependency chain.
	var s0, s1 float64
	for i, v := range src {
		x := (v - m) * scale
		var e float32
		if x >= -expCutoff { // false for NaN and -Inf
			k := int32(x*log2e64 - 0.5)
			fk := float32(k)
			r := x - fk*ln2hi64 - fk*ln2lo64
			p := 1 + r + r*r*(0.5+r*(1.0/6))
			e = p * math.Float32frombits(exp2Tab[k&63]+uint32(k>>6)<<23)
			if e < floor {
				e = 0
			}
		}
		dst[i] = e
		if i&1 == 0 {
			s0 += float64(e)
		} else {
			s1 += float64(e)
		}
	}
	return s0 + s1
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

// expStoreHist is expStore without a floor that also accumulates the
// per-bucket mass into hist (which the caller has zeroed).
func expStoreHist(dst, src []float32, m, scale float32, hist *[nBuckets]float64) float64 {
	dst = dst[:len(src)]
	var s0, s1 float64
	for i, v := range src {
		x := (v - m) * scale
		var e float32
		if x >= -expCutoff {
			k := int32(x*log2e64 - 0.5)
			fk := float32(k)
			r := x - fk*ln2hi64 - fk*ln2lo64
			p := 1 + r + r*r*(0.5+r*(1.0/6))
			e = p * math.Float32frombits(exp2Tab[k&63]+uint32(k>>6)<<23)
		}
		dst[i] = e
		hist[bucketOf(e)&(nBuckets-1)] += float64(e)
		if i&1 == 0 {
			s0 += float64(e)
		} else {
			s1 += float64(e)
		}
	}
	return s0 + s1
}

// expSum returns sum_i exp(src_i - m) without storing anything; it is the
// log-sum-exp pass for raw logprobs.
func expSum(src []float32, m float32) float64 {
	var s0, s1 float64
	for i, v := range src {
		x := v - m
		if x >= -expCutoff {
			k := int32(x*log2e64 - 0.5)
			fk := float32(k)
			r := x - fk*ln2hi64 - fk*ln2lo64
			p := 1 + r + r*r*(0.5+r*(1.0/6))
			e := p * math.Float32frombits(exp2Tab[k&63]+uint32(k>>6)<<23)
			if i&1 == 0 {
				s0 += float64(e)
			} else {
				s1 += float64(e)
			}
		}
	}
	return s0 + s1
}
