package grammar

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomSchema builds a random schema from the keywords that shape masks
// most: strings bounded or not, patterns (ASCII, Unicode, '.'), enums
// with non-ASCII values, numbers, arrays and nested objects.
func randomSchema(r *rand.Rand, depth int) string {
	patterns := []string{
		`^[a-z0-9.]+@[a-z]+\\.[a-z]{2,4}$`, `^[А-Яа-я ]+$`, `^a.{0,6}b$`, `^[^x]*$`, `[0-9]{3}`,
		`^[a-zé✓ ]{1,5}$`, `^\\w+$`, `^(ab|cd)*$`, `^.*$`,
	}
	str := func() string {
		switch r.IntN(4) {
		case 0:
			return `{"type":"string"}`
		case 1:
			lo := r.IntN(3)
			return fmt.Sprintf(`{"type":"string","minLength":%d,"maxLength":%d}`, lo, lo+r.IntN(24))
		case 2:
			return fmt.Sprintf(`{"type":"string","pattern":%q}`, patterns[r.IntN(len(patterns))])
		}
		return fmt.Sprintf(`{"type":"string","maxLength":%d}`, 1+r.IntN(60))
	}
	leaf := func() string {
		switch r.IntN(6) {
		case 0:
			return `{"type":"integer","minimum":-5,"maximum":1200}`
		case 1:
			return `{"type":"number"}`
		case 2:
			return `{"enum":["héllo","wörld ✓","a\"b",7,null]}`
		case 3:
			return `{"type":"boolean"}`
		}
		return str()
	}
	if depth == 0 || r.IntN(3) == 0 {
		return leaf()
	}
	switch r.IntN(3) {
	case 0:
		return fmt.Sprintf(`{"type":"array","items":%s,"maxItems":%d}`, randomSchema(r, depth-1), 1+r.IntN(4))
	case 1:
		return fmt.Sprintf(`{"anyOf":[%s,%s]}`, randomSchema(r, depth-1), randomSchema(r, depth-1))
	}
	var props, req []string
	for i := range 1 + r.IntN(4) {
		name := fmt.Sprintf("p%d", i)
		props = append(props, fmt.Sprintf(`"%s":%s`, name, randomSchema(r, depth-1)))
		if r.IntN(2) == 0 {
			req = append(req, `"`+name+`"`)
		}
	}
	return fmt.Sprintf(`{"type":"object","properties":{%s},"required":[%s]}`, strings.Join(props, ","), strings.Join(req, ","))
}

// edgeSchemas end content runs in each way the splits handle: at a
// length bound (longer content dies), where only some of the content
// goes on (longer content tokens walked one by one), where multi-byte
// characters stop and ASCII goes on, and not at all.
var edgeSchemas = []string{
	`{"type":"string","maxLength":40}`,
	`{"type":"string","minLength":20}`,
	`{"type":"string","maxLength":3}`,
	`{"type":"string","pattern":"^[a-z\\x{80}-\\x{10FFFF}]{4}[a-z]*$"}`,
	`{"type":"string","pattern":"^[a-z\\x{80}-\\x{10FFFF}]{20}[a-z]*$"}`,
	`{"type":"string","pattern":"^[a-z ]{18} *$"}`,
	`{"type":"string","pattern":"^.*$"}`,
	`{"anyOf":[{"type":"string","maxLength":20},{"type":"string","pattern":"^[a-z]*$"}]}`,
}

// TestMasksAgainstBruteForce: on random schemas (some with a thought
// before the value) and the edge schemas, in states along generated
// documents (deep inside strings) and random states, over real
// vocabularies, the mask (content splits, trie walks, in parts or not)
// equals the brute-force one: every token walked alone.
func TestMasksAgainstBruteForce(t *testing.T) {
	schemas, perSchema := 24, 24
	if testing.Short() {
		schemas, perSchema = 6, 8
	}
	for _, name := range []string{"llama3_1", "qwen3"} {
		t.Run(name, func(t *testing.T) {
			tok := loadTok(t, "tokenizers/"+name)
			v := NewVocab(tok, tok.VocabSize())
			r := rand.New(rand.NewPCG(7, uint64(len(name))))
			all := slices.Clone(edgeSchemas)
			for range schemas {
				all = append(all, randomSchema(r, 3))
			}
			for i, schema := range all {
				var o Options
				if i%5 == 4 {
					o.Think = &Thinking{Open: "<think>", Close: "</think>"}
				}
				g, err := CompileSchema([]byte(schema), o)
				if err != nil {
					t.Fatalf("%s: %v", schema, err)
				}
				tt := NewTokenTable(g, v)
				for j, s := range testStates(g, r, perSchema) {
					workers := 1 + 2*(j%2) // cut the walks in parts, or not
					v.parts = splitParts(len(v.ids), workers, 1)
					for _, sp := range v.splits {
						sp.rest.parts = splitParts(len(sp.rest.ids), workers, 1)
					}
					got := make([]uint64, v.Words())
					v.mask(g.d, s, tt.cc, got)
					want := bruteMask(g, v, s)
					for w := range want {
						if got[w] != want[w] {
							t.Fatalf("%s, state %d: mask word %d = %x, brute force %x", schema, s, w, got[w], want[w])
						}
					}
				}
			}
			if len(v.splits) < 3 {
				t.Fatalf("%d content splits used", len(v.splits))
			}
		})
	}
}

// testStates are up to n states of g: every state along generated
// documents, then random ones.
func testStates(g *Grammar, r *rand.Rand, n int) []int32 {
	dist := g.distances()
	var out []int32
	for range 4 {
		s := g.d.start
		for _, c := range g.sample(r, dist, 10+r.IntN(60)) {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
			s = g.d.next(s, c)
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	for len(out) < 2*n {
		out = append(out, int32(r.IntN(g.d.numStates())))
	}
	return out[:n]
}

// TestTokenChars: a token's length in content characters.
func TestTokenChars(t *testing.T) {
	ascii := splitKey{set: plainASCII}
	utf := ascii
	utf.utf8 = true
	for _, c := range []struct {
		b              string
		byByte, byChar int
	}{
		{"abc", 3, 3},
		{"a\"", -1, -1},
		{"é✓", -1, 2},
		{"a\xe2\x9c", -1, 2},     // a cut ✓
		{"\x9c\x93", -1, -1},     // the end of one
		{"\xe0\x80", -1, -1},     // overlong
		{"\xed\xa0\x80", -1, -1}, // a surrogate
		{"\xf4\x90", -1, -1},     // past U+10FFFF
		{"\xf0\x9f\x98\x80x", -1, 2},
	} {
		if got := ascii.chars([]byte(c.b)); got != c.byByte {
			t.Errorf("bytes of %q = %d, want %d", c.b, got, c.byByte)
		}
		if got := utf.chars([]byte(c.b)); got != c.byChar {
			t.Errorf("chars of %q = %d, want %d", c.b, got, c.byChar)
		}
	}
}
