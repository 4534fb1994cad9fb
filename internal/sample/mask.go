package sample

import (
	"math"
	"math/bits"
)

// ApplyMask sets to -Inf the logits of the tokens whose bit is clear in
// allowed (bit id%64 of allowed[id/64]; ids past the mask are cleared):
// a constraint's mask applied before sampling. The sampler then draws
// from the allowed tokens only, and the logprobs it reports are those of
// the masked row (-Inf for masked tokens).
func ApplyMask(logits []float32, allowed []uint64) {
	negInf := float32(math.Inf(-1))
	for lo := 0; lo < len(logits); lo += 64 {
		var x uint64
		if w := lo / 64; w < len(allowed) {
			x = allowed[w]
		}
		hi := min(lo+64, len(logits))
		switch x {
		case ^uint64(0):
			continue
		case 0:
			row := logits[lo:hi]
			for i := range row {
				row[i] = negInf
			}
			continue
		}
		// Visit only the cleared bits: inside a string nearly all are set.
		for z := ^x; z != 0; z &= z - 1 {
			if i := lo + bits.TrailingZeros64(z); i < hi {
				logits[i] = negInf
			}
		}
	}
}
