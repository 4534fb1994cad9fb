package tokenizer

import "unicode/utf8"

// GPT-2's byte-level alphabet: every byte maps to one printable rune so that
// BPE vocabularies never contain raw control bytes or spaces. Printable
// Latin-1 bytes map to themselves, the other 68 to U+0100 upwards in order.
var (
	byteToRune  [256]rune
	byteToUTF8  [256]string
	runeToByte  [0x144]int16 // -1 where the rune is not in the alphabet
	byteIsPrint [256]bool
)

func init() {
	for b := 0; b < 256; b++ {
		byteIsPrint[b] = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n := rune(0)
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !byteIsPrint[b] {
			r = 256 + n
			n++
		}
		byteToRune[b] = r
		byteToUTF8[b] = string(r)
		runeToByte[r] = int16(b)
	}
}

// appendByteLevel maps raw bytes to their byte-level runes.
func appendByteLevel(dst, src []byte) []byte {
	for _, b := range src {
		if b < 0x80 && byteIsPrint[b] {
			dst = append(dst, b)
		} else {
			dst = append(dst, byteToUTF8[b]...)
		}
	}
	return dst
}

// byteLevelBytes converts a token back to bytes the way HF's ByteLevel
// decoder does: if any rune is outside the alphabet the token's own UTF-8
// bytes are used unchanged.
func byteLevelBytes(dst []byte, tok string) []byte {
	start := len(dst)
	for _, r := range tok {
		if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
			return append(dst[:start], tok...)
		}
		dst = append(dst, byte(runeToByte[r]))
	}
	return dst
}

const (
	seqOK = iota
	seqInvalid
	seqIncomplete
)

// scanSeq classifies the UTF-8 sequence at the start of p (len(p) > 0).
// For seqOK n is its length; for seqInvalid n is the length of the maximal
// well-formed prefix (at least 1) that becomes one U+FFFD, as in Rust's
// String::from_utf8_lossy and Python's errors="replace"; for seqIncomplete
// p ends inside a sequence that could still become valid.
func scanSeq(p []byte) (n, status int) {
	b0 := p[0]
	if b0 < 0x80 {
		return 1, seqOK
	}
	need := 0
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case b0 >= 0xC2 && b0 <= 0xDF:
		need = 1
	case b0 == 0xE0:
		need, lo = 2, 0xA0
	case b0 >= 0xE1 && b0 <= 0xEC, b0 == 0xEE, b0 == 0xEF:
		need = 2
	case b0 == 0xED:
		need, hi = 2, 0x9F
	case b0 == 0xF0:
		need, lo = 3, 0x90
	case b0 >= 0xF1 && b0 <= 0xF3:
		need = 3
	case b0 == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1, seqInvalid
	}
	for i := 1; i <= need; i++ {
		if i >= len(p) {
			return i, seqIncomplete
		}
		if c := p[i]; c < lo || c > hi {
			return i, seqInvalid
		}
		lo, hi = 0x80, 0xBF
	}
	return need + 1, seqOK
}

// appendLossy appends src to dst as valid UTF-8, replacing each maximal
// ill-formed subsequence by U+FFFD. Unless final, a trailing incomplete
// sequence is left unconsumed; rest is its length.
func appendLossy(dst, src []byte, final bool) (out []byte, rest int) {
	i := 0
	for i < len(src) {
		if src[i] < 0x80 {
			dst = append(dst, src[i])
			i++
			continue
		}
		n, st := scanSeq(src[i:])
		switch st {
		case seqOK:
			dst = append(dst, src[i:i+n]...)
		case seqInvalid:
			dst = utf8.AppendRune(dst, utf8.RuneError)
		case seqIncomplete:
			if !final {
				return dst, len(src) - i
			}
			dst = utf8.AppendRune(dst, utf8.RuneError)
		}
		i += n
	}
	return dst, 0
}

// lossyString is String::from_utf8_lossy.
func lossyString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out, _ := appendLossy(make([]byte, 0, len(b)+8), b, true)
	return string(out)
}
