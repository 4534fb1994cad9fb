package quant

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

// Every expected word below was worked out by hand from the layout rule
// "element j occupies stream bits [j*bits, (j+1)*bits), bit k of the stream
// is bit k%32 of word k/32"; the comments show the working.
var handCases = []struct {
	name  string
	bits  int
	q     []uint8
	words []uint32
}{
	{
		// 16 values of 2 bits = 1 word. Hex digit k holds elements 2k
		// (bits 0-1 of the digit) and 2k+1 (bits 2-3):
		//  k0: 0|1<<2=4  k1: 2|3<<2=E  k2: 3|2<<2=B  k3: 1|0=1
		//  k4: 1|1<<2=5  k5: 5         k6: 2|2<<2=A  k7: A
		name:  "2bit",
		bits:  2,
		q:     []uint8{0, 1, 2, 3, 3, 2, 1, 0, 1, 1, 1, 1, 2, 2, 2, 2},
		words: []uint32{0xAA551BE4},
	},
	{
		// 32 values j%8 of 3 bits = 3 words. Eight values 0..7 form the
		// 24-bit octal number 0o76543210 = 1111_1010_1100_0110_1000_1000b
		// = 0xFAC688; the stream is four copies C0..C3 at bits 0, 24, 48, 72.
		//  word0 = C0 | (C1 & 0xFF)<<24               = 0x88FAC688
		//  word1 = C1>>8 (16 bits) | (C2 & 0xFFFF)<<16 = 0xC688FAC6
		//  word2 = C2>>16 (8 bits) | C3<<8             = 0xFAC688FA
		// Element 10 (value 2) straddles bits 30-32: word0 bits 30,31 are
		// bits 6,7 of 0x88 = 0,1 and word1 bit 0 is bit 0 of 0xC6 = 0,
		// giving 0b010 = 2.
		name: "3bit-ramp",
		bits: 3,
		q: []uint8{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7,
			0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7},
		words: []uint32{0x88FAC688, 0xC688FAC6, 0xFAC688FA},
	},
	{
		// Only element 10 = 7 (bits 30,31,32) and element 21 = 5 = 101b
		// (bits 63,64,65): 10 is split 2+1 over words 0/1, 21 is split 1+2
		// over words 1/2.
		//  word0 = bits 30,31        = 0xC0000000
		//  word1 = bit 0 (of el. 10) | bit 31 (bit 0 of 5 = 1) = 0x80000001
		//  word2 = bits 0,1 = bits 1,2 of 5 = 0,1 -> 0b10 = 0x00000002
		name: "3bit-straddle",
		bits: 3,
		q: func() []uint8 {
			q := make([]uint8, 32)
			q[10], q[21] = 7, 5
			return q
		}(),
		words: []uint32{0xC0000000, 0x80000001, 0x00000002},
	},
	{
		// 16 values of 4 bits = 2 words, element j at nibble j%8.
		//  word0 nibbles (high to low) 8 7 6 5 4 3 2 1 = 0x87654321
		//  word1 elements 15,0,9,10,11,12,13,14 -> E D C B A 9 0 F = 0xEDCBA90F
		name:  "4bit",
		bits:  4,
		q:     []uint8{1, 2, 3, 4, 5, 6, 7, 8, 15, 0, 9, 10, 11, 12, 13, 14},
		words: []uint32{0x87654321, 0xEDCBA90F},
	},
	{
		// 32 values of 5 bits = 5 words; nonzero elements:
		//  el 6  = 23 = 10111b at bits 30-34: word0 b30,b31 = 1,1; word1
		//          b0..b2 = 1,0,1 -> word0 0xC0000000, word1 |= 0x5
		//  el 12 = 31 at bits 60-64: word1 b28..b31 -> 0xF0000000, word2 b0 = 1
		//  el 19 = 19 = 10011b at bits 95-99: word2 b31 = 1; word3 b0..b3 =
		//          bits 1..4 of 19 = 1,0,0,1 -> 0x9
		//  el 25 = 14 = 01110b at bits 125-129: word3 b29,b30,b31 = 0,1,1 ->
		//          0xC0000000; word4 b0,b1 = 1,0 -> 0x1
		//  el 31 = 31 at bits 155-159: word4 b27..b31 -> 0xF8000000
		name: "5bit-straddle",
		bits: 5,
		q: func() []uint8 {
			q := make([]uint8, 32)
			q[6], q[12], q[19], q[25], q[31] = 23, 31, 19, 14, 31
			return q
		}(),
		words: []uint32{0xC0000000, 0xF0000005, 0x80000001, 0xC0000009, 0xF8000001},
	},
	{
		// 16 values of 6 bits = 3 words; nonzero elements:
		//  el 0  = 1 at bit 0                           -> word0 0x00000001
		//  el 5  = 53 = 110101b at bits 30-35: word0 b30,b31 = 1,0 ->
		//          0x40000000; word1 b0..b3 = bits 2..5 = 1,0,1,1 -> 0xD
		//  el 10 = 38 = 100110b at bits 60-65: word1 b28..b31 = 0,1,1,0 ->
		//          0x60000000; word2 b0,b1 = 0,1 -> 0x2
		//  el 15 = 63 at bits 90-95: word2 b26..b31 -> 0xFC000000
		name: "6bit-straddle",
		bits: 6,
		q: func() []uint8 {
			q := make([]uint8, 16)
			q[0], q[5], q[10], q[15] = 1, 53, 38, 63
			return q
		}(),
		words: []uint32{0x40000001, 0x6000000D, 0xFC000002},
	},
	{
		// 8 values of 8 bits = 2 words, element j at byte j%4.
		name:  "8bit",
		bits:  8,
		q:     []uint8{0x01, 0x80, 0xFF, 0x10, 0x07, 0x00, 0x00, 0xAB},
		words: []uint32{0x10FF8001, 0xAB000007},
	},
}

func TestPackHandWorked(t *testing.T) {
	for _, c := range handCases {
		got := Pack(c.q, c.bits)
		if !slices.Equal(got, c.words) {
			t.Errorf("%s: Pack = %#08x, want %#08x", c.name, got, c.words)
		}
		back := Unpack(c.words, c.bits, len(c.q))
		if !slices.Equal(back, c.q) {
			t.Errorf("%s: Unpack = %v, want %v", c.name, back, c.q)
		}
	}
}

func TestPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		// Odd lengths leave a partially filled final word.
		for _, n := range []int{1, 7, 31, 32, 33, 95, 128, 1000} {
			q := make([]uint8, n)
			for i := range q {
				q[i] = uint8(rng.Intn(1 << bits))
			}
			words := Pack(q, bits)
			if len(words) != PackedCols(n, bits) {
				t.Fatalf("bits %d n %d: %d words, want %d", bits, n, len(words), PackedCols(n, bits))
			}
			if got := Unpack(words, bits, n); !slices.Equal(got, q) {
				t.Fatalf("bits %d n %d: round trip mismatch", bits, n)
			}
		}
	}
}

// TestPackPerWordLayout checks the documented shortcut for 2/4/8 bits:
// element j of a word sits at bits (j%per)*bits.
func TestPackPerWordLayout(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, bits := range []int{2, 4, 8} {
		per := 32 / bits
		q := make([]uint8, 4*per)
		for i := range q {
			q[i] = uint8(rng.Intn(1 << bits))
		}
		words := Pack(q, bits)
		for j, v := range q {
			got := uint8(words[j/per] >> ((j % per) * bits) & (1<<bits - 1))
			if got != v {
				t.Fatalf("bits %d element %d: %d, want %d", bits, j, got, v)
			}
		}
	}
}

func TestPackMasksHighBits(t *testing.T) {
	if got := Pack([]uint8{0xFF, 0}, 3); got[0] != 7 {
		t.Fatalf("Pack did not mask: %#x", got[0])
	}
}

func TestDequantizeHand(t *testing.T) {
	// Two rows of 32 4-bit values, one group each.
	// Row 0: q = 0..15, 0..15 -> words 0x76543210, 0xFEDCBA98 twice;
	//        scale 0.5, bias -1 -> w = 0.5*q - 1.
	// Row 1: q = 3 everywhere -> 0x33333333; scale 2, bias 0.25 -> 6.25.
	words := []uint32{
		0x76543210, 0xFEDCBA98, 0x76543210, 0xFEDCBA98,
		0x33333333, 0x33333333, 0x33333333, 0x33333333,
	}
	w, err := Dequantize(words, []float32{0.5, 2}, []float32{-1, 0.25}, 2, 32, 4, 32)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 32; i++ {
		if want := 0.5*float32(i%16) - 1; w[i] != want {
			t.Fatalf("w[0][%d] = %v, want %v", i, w[i], want)
		}
		if w[32+i] != 6.25 {
			t.Fatalf("w[1][%d] = %v, want 6.25", i, w[32+i])
		}
	}
}

func TestDequantizeGroups(t *testing.T) {
	// One row of 64 8-bit values in two groups of 32: group 0 all q=10 with
	// scale 1, bias 0 -> 10; group 1 all q=1 with scale -3, bias 100 -> 97.
	q := make([]uint8, 64)
	for i := range q {
		q[i] = 10
		if i >= 32 {
			q[i] = 1
		}
	}
	w, err := Dequantize(Pack(q, 8), []float32{1, -3}, []float32{0, 100}, 1, 64, 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	if w[0] != 10 || w[31] != 10 || w[32] != 97 || w[63] != 97 {
		t.Fatalf("got %v", w)
	}
}

func TestQuantizeExact(t *testing.T) {
	// A group holding 0..31 at 5 bits: scale (31-0)/31 = 1, bias 0, q = j,
	// and a constant group (scale 0) must come back exactly.
	w := make([]float32, 64)
	for i := 0; i < 32; i++ {
		w[i] = float32(i)
		w[32+i] = -2.5
	}
	words, scales, biases, err := Quantize(w, 1, 64, 5, 32)
	if err != nil {
		t.Fatal(err)
	}
	if scales[0] != 1 || biases[0] != 0 || scales[1] != 0 || biases[1] != -2.5 {
		t.Fatalf("scales %v biases %v", scales, biases)
	}
	q := Unpack(words, 5, 64)
	for i := 0; i < 32; i++ {
		if q[i] != uint8(i) || q[32+i] != 0 {
			t.Fatalf("q = %v", q)
		}
	}
	back, _ := Dequantize(words, scales, biases, 1, 64, 5, 32)
	if !slices.Equal(back, w) {
		t.Fatalf("round trip %v", back)
	}
}

func TestQuantizeErrorBound(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, group := range []int{32, 64, 128} {
			rows, cols := 3, 256
			w := make([]float32, rows*cols)
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			words, scales, biases, err := Quantize(w, rows, cols, bits, group)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Dequantize(words, scales, biases, rows, cols, bits, group)
			if err != nil {
				t.Fatal(err)
			}
			for i := range w {
				s := scales[(i/cols)*(cols/group)+(i%cols)/group]
				if d := math.Abs(float64(w[i] - back[i])); d > float64(s)/2*1.0001+1e-6 {
					t.Fatalf("bits %d group %d: |w-deq| = %g > scale/2 = %g", bits, group, d, s/2)
				}
			}
		}
	}
}

func TestCheckShapes(t *testing.T) {
	if err := CheckShapes(4096, 4096, 512, 64, 4, 64); err != nil {
		t.Fatal(err)
	}
	if err := CheckShapes(10, 96, 9, 3, 3, 32); err != nil {
		t.Fatal(err)
	}
	bad := [][6]int{
		{4096, 4096, 512, 64, 7, 64},  // bits
		{4096, 4096, 512, 64, 4, 48},  // group
		{4096, 4000, 500, 62, 4, 64},  // in % group
		{4096, 4096, 511, 64, 4, 64},  // packed cols
		{4096, 4096, 512, 32, 4, 64},  // scale cols
		{0, 4096, 512, 64, 4, 64},     // out
		{4096, 4096, 1536, 64, 6, 64}, // 6 bits: 4096*6/32 = 768
	}
	for _, b := range bad {
		if err := CheckShapes(b[0], b[1], b[2], b[3], b[4], b[5]); err == nil {
			t.Errorf("CheckShapes%v accepted", b)
		}
	}
}

func TestDequantizeRejectsShortBuffers(t *testing.T) {
	if _, err := Dequantize(make([]uint32, 3), []float32{1}, []float32{0}, 1, 32, 4, 32); err == nil {
		t.Fatal("short words accepted")
	}
}
