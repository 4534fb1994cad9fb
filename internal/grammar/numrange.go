package grammar

import (
	"math"
	"strconv"
	"strings"
)

// intRange compiles an integer with optional minimum / maximum /
// exclusiveMinimum / exclusiveMaximum into the decimal strings of exactly
// that range (bounds past int64 are clamped to it).
func (c *compiler) intRange(s *jval, path string) frag {
	lo, hi := int64(-math.MaxInt64), int64(math.MaxInt64)
	bounded := false
	bound := func(key string, f func(float64) int64, set *int64, tighter func(a, b int64) bool) {
		v := s.get(key)
		if v == nil {
			return
		}
		x, err := strconv.ParseFloat(v.str, 64)
		if v.kind != 'n' || err != nil {
			c.fail(path+"/"+key, "must be a number")
			return
		}
		bounded = true
		b := clampInt(f(x))
		if tighter(b, *set) {
			*set = b
		}
	}
	larger := func(a, b int64) bool { return a > b }
	smaller := func(a, b int64) bool { return a < b }
	bound("minimum", func(x float64) int64 { return ceilInt(x) }, &lo, larger)
	bound("exclusiveMinimum", func(x float64) int64 { return floorInt(x) + 1 }, &lo, larger)
	bound("maximum", func(x float64) int64 { return floorInt(x) }, &hi, smaller)
	bound("exclusiveMaximum", func(x float64) int64 { return ceilInt(x) - 1 }, &hi, smaller)
	if !bounded {
		return c.n.integer()
	}
	if lo > hi {
		return c.n.none()
	}
	return c.n.intBetween(lo, hi)
}

func floorInt(x float64) int64 { return clampInt(int64(max(min(math.Floor(x), 9.2e18), -9.2e18))) }
func ceilInt(x float64) int64  { return clampInt(int64(max(min(math.Ceil(x), 9.2e18), -9.2e18))) }

func clampInt(x int64) int64 { return max(min(x, math.MaxInt64), -math.MaxInt64) }

// intBetween is the integers lo..hi written without leading zeros.
func (n *nfa) intBetween(lo, hi int64) frag {
	var alts []frag
	if lo < 0 {
		// -|x| for x in lo..min(hi,-1): magnitudes max(1,-hi)..-lo.
		mlo, mhi := uint64(1), uint64(-lo)
		if hi < -1 {
			mlo = uint64(-hi)
		}
		alts = append(alts, n.seq(n.lit("-"), n.natBetween(mlo, mhi)))
	}
	if hi >= 0 {
		alts = append(alts, n.natBetween(uint64(max(lo, 0)), uint64(hi)))
	}
	return n.alt(alts...)
}

// natBetween is the naturals lo..hi, grouped by number of digits.
func (n *nfa) natBetween(lo, hi uint64) frag {
	var alts []frag
	for l := len(strconv.FormatUint(lo, 10)); l <= len(strconv.FormatUint(hi, 10)); l++ {
		a, b := pow10(l-1), pow10(l)-1
		if l == 1 {
			a = 0
		}
		a, b = max(a, lo), min(b, hi)
		if a <= b {
			alts = append(alts, n.digitsBetween(strconv.FormatUint(a, 10), strconv.FormatUint(b, 10)))
		}
	}
	return n.alt(alts...)
}

func pow10(k int) uint64 {
	p := uint64(1)
	for range k {
		p *= 10
	}
	return p
}

// digitsBetween is the digit strings of len(lo) from lo to hi (same
// length), the classic range-to-regex split on the first digit.
func (n *nfa) digitsBetween(lo, hi string) frag {
	if lo == "" {
		return n.empty()
	}
	rest := len(lo) - 1
	anyDigits := func() frag { return n.repeat(func(n *nfa) frag { return n.class(digit) }, rest, rest) }
	if strings.Trim(lo[1:], "0") == "" && strings.Trim(hi[1:], "9") == "" {
		return n.seq(n.class(rangeSet(lo[0], hi[0])), anyDigits())
	}
	if lo[0] == hi[0] {
		return n.seq(n.lit(lo[:1]), n.digitsBetween(lo[1:], hi[1:]))
	}
	alts := []frag{n.seq(n.lit(lo[:1]), n.digitsBetween(lo[1:], strings.Repeat("9", rest)))}
	if lo[0]+1 <= hi[0]-1 {
		alts = append(alts, n.seq(n.class(rangeSet(lo[0]+1, hi[0]-1)), anyDigits()))
	}
	alts = append(alts, n.seq(n.lit(hi[:1]), n.digitsBetween(strings.Repeat("0", rest), hi[1:])))
	return n.alt(alts...)
}
