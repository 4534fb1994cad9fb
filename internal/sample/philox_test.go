package sample

import "testing"

// TestPhilox4x32KnownAnswers checks Random123's published known-answer
// vectors for Philox4x32-10 (its tests/kat_vectors).
func TestPhilox4x32KnownAnswers(t *testing.T) {
	for _, c := range []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	} {
		if got := Philox4x32(c.ctr, c.key); got != c.want {
			t.Errorf("Philox4x32(%08x, %08x) = %08x, want %08x", c.ctr, c.key, got, c.want)
		}
	}
}

// TestUniformRange: draws stay in [0, 1), differ between counters and
// seeds, and have a mean near 1/2.
func TestUniformRange(t *testing.T) {
	const n = 100000
	sum := 0.0
	seen := map[float64]bool{}
	for i := range uint64(n) {
		u := Uniform(7, i)
		if u < 0 || u >= 1 {
			t.Fatalf("Uniform(7, %d) = %v outside [0, 1)", i, u)
		}
		seen[u] = true
		sum += u
	}
	if len(seen) < n-1 {
		t.Errorf("%d distinct draws of %d", len(seen), n)
	}
	if m := sum / n; m < 0.495 || m > 0.505 {
		t.Errorf("mean %v, want about 0.5", m)
	}
	if Uniform(1, 0) == Uniform(2, 0) {
		t.Error("seeds 1 and 2 give the same first draw")
	}
}

// TestSampleWithIDOrder: SampleWith draws by inverse CDF over the
// survivors in id order, so a larger u never picks a smaller id, u near 0
// picks the first survivor and u near 1 the last, whatever the filters.
func TestSampleWithIDOrder(t *testing.T) {
	logits := testLogits(300, 11, 2)
	for _, p := range []Params{
		{Temperature: 1},
		{Temperature: 0.8, TopK: 20},
		{Temperature: 1, TopK: 2000, TopP: 0.7},
		{Temperature: 1, TopP: 0.6},
		{Temperature: 1.2, MinP: 0.05},
		{Temperature: 1, TopK: 30, TopP: 0.9, MinP: 0.02},
	} {
		want := refDist(t, logits, p, nil, nil)
		first, last := -1, -1
		for i, w := range want {
			if w > 0 {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		s := New(p, len(logits))
		prev := int32(-1)
		for j := range 2001 {
			u := float64(j) / 2001
			id := s.SampleWith(logits, nil, nil, u).ID
			if want[id] == 0 {
				t.Fatalf("%+v: u %v picked excluded token %d", p, u, id)
			}
			if id < prev {
				t.Fatalf("%+v: u %v picked %d after %d for a smaller u", p, u, id, prev)
			}
			if j == 0 && int(id) != first {
				t.Errorf("%+v: u 0 picked %d, want the first survivor %d", p, id, first)
			}
			prev = id
		}
		if got := s.SampleWith(logits, nil, nil, 0.9999999).ID; int(got) != last {
			t.Errorf("%+v: u ~1 picked %d, want the last survivor %d", p, got, last)
		}
	}
}
