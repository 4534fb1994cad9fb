package sample

import "math/bits"

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC11; the Random123 reference) is the counter-based generator that
// draws the uniform of a device-sampled token. A counter-based generator
// makes a draw a pure function of (key, counter): a request keyed by its
// seed and counted by its output position samples the same uniform
// whatever else shares its batch, and the CUDA kernel (sample.cu,
// philox4x32_10) computes the very same numbers, so the host and the
// device pick the same token from the same distribution.
const (
	philoxM0 = 0xD2511F53
	philoxM1 = 0xCD9E8D57
	philoxW0 = 0x9E3779B9 // golden ratio
	philoxW1 = 0xBB67AE85 // sqrt(3) - 1
)

// Philox4x32 returns Philox4x32-10 of counter ctr under key.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	for r := 0; r < 10; r++ {
		if r > 0 {
			key[0] += philoxW0
			key[1] += philoxW1
		}
		hi0, lo0 := bits.Mul32(philoxM0, ctr[0])
		hi1, lo1 := bits.Mul32(philoxM1, ctr[2])
		ctr = [4]uint32{hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0}
	}
	return ctr
}

// Uniform is the draw in [0, 1) for a request's seed and counter (its
// output position): 53 random bits of Philox4x32-10 with key = seed and
// counter = (counter, 0, 0, 0) as 32-bit words, low word first.
func Uniform(seed, counter uint64) float64 {
	o := Philox4x32([4]uint32{uint32(counter), uint32(counter >> 32), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	return float64((uint64(o[0])<<32|uint64(o[1]))>>11) * 0x1p-53
}
