package grammar

import (
	"errors"
	"testing"

	"github.com/mlxcel/mlxcel/internal/tokenizer"
)

const testdata = "../../../shared/testdata/"

func loadTok(tb testing.TB, name string) *tokenizer.Tokenizer {
	tb.Helper()
	tok, err := tokenizer.Load(testdata + name)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// personSchema is the real schema of the token-level tests and benchmarks.
const personSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "pattern": "^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}, "required": ["city"]},
    "role": {"enum": ["admin", "user", "guest"]},
    "score": {"type": "number"},
    "active": {"type": "boolean"}
  },
  "required": ["name", "age", "role"]
}`

const personDoc = `{"name": "Ada Lovelace", "age": 36, "email": "ada@math.org", "tags": ["math", "poetry", "engines"], ` +
	`"address": {"city": "London", "zip": "W1"}, "role": "admin", "score": 9.75, "active": true}`

// bruteMask is the reference for Vocab.mask: every token walked alone.
func bruteMask(g *Grammar, v *Vocab, s int32) []uint64 {
	out := make([]uint64, v.Words())
	for id, b := range v.byID {
		if b != nil && g.walk(s, b) >= 0 {
			out[id>>6] |= 1 << (id & 63)
		}
	}
	return out
}

func hasBit(m []uint64, id int32) bool { return m[id>>6]&(1<<(id&63)) != 0 }

// TestTokenMasksRealTokenizers follows the real tokenization of a valid
// document through the matcher: every token must be allowed where it
// comes, each state's mask must equal the brute-force one, the end token
// must be refused before the end and allowed after it, and special tokens
// never.
func TestTokenMasksRealTokenizers(t *testing.T) {
	g, err := CompileSchema([]byte(personSchema), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !g.Accepts([]byte(personDoc)) {
		t.Fatal("the grammar refuses the document")
	}
	for _, name := range []string{"tokenizers/llama3_1", "tokenizers/qwen3", "models/stories260k"} {
		t.Run(name, func(t *testing.T) {
			tok := loadTok(t, name)
			v := NewVocab(tok, tok.VocabSize())
			ids, err := tok.Encode(personDoc, false)
			if err != nil {
				t.Fatal(err)
			}
			if string(tok.TokenBytes(ids[0])) == " " {
				// SentencePiece's normalizer prepends "▁" to the text; a
				// model's output stream has no such token.
				ids = ids[1:]
			}
			eos, _ := tok.EOS()
			m := NewTokenTable(g, v).NewMatcher([]int32{eos})
			mask := make([]uint64, v.Words())
			specials := tok.SpecialTokens()
			for i, id := range append(ids, eos) {
				if err := m.Mask(mask); err != nil {
					t.Fatalf("token %d: %v", i, err)
				}
				if !hasBit(mask, id) {
					t.Fatalf("token %d (%d %q) is masked out", i, id, tok.TokenBytes(id))
				}
				if id != eos && hasBit(mask, eos) {
					t.Fatalf("EOS allowed before the end, at token %d", i)
				}
				for _, sp := range specials {
					if sp != eos && hasBit(mask, sp) {
						t.Fatalf("special token %d allowed at token %d", sp, i)
					}
				}
				if i%7 == 0 {
					want := bruteMask(g, v, m.state)
					for w := range want {
						if want[w] != mask[w] {
							t.Fatalf("token %d: mask word %d = %x, brute force %x", i, w, mask[w], want[w])
						}
					}
				}
				if err := m.Accept(id); err != nil {
					t.Fatal(err)
				}
			}
			if !m.Complete() {
				t.Fatal("not complete after EOS")
			}
			if m.Mask(mask); !hasBit(mask, eos) || popcount(mask) != 1 {
				t.Fatal("after the end only EOS may follow")
			}
		})
	}
}

func popcount(m []uint64) int {
	n := 0
	for _, w := range m {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	return n
}

// TestToolCallQwen: a forced Hermes call over the Qwen tokenizer: the
// <tool_call> markup is an added (non-special) token and is allowed; the
// text of the call is exactly what the parser reads.
func TestToolCallQwen(t *testing.T) {
	tools := []Tool{
		{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"]}`)},
		{Name: "noop"},
	}
	g, err := ToolCalls("hermes", tools, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>"
	for _, c := range []struct {
		text string
		want bool
	}{
		{good, true},
		{"<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>", true},
		{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", false},
		{"<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>", false},
		{"{\"name\": \"noop\", \"arguments\": {}}", false},
	} {
		if got := g.Accepts([]byte(c.text)); got != c.want {
			t.Errorf("Accepts(%q) = %v, want %v", c.text, got, c.want)
		}
	}
	tok := loadTok(t, "tokenizers/qwen3")
	v := NewVocab(tok, tok.VocabSize())
	ids, _ := tok.Encode(good, false)
	open, _ := tok.TokenID("<tool_call>")
	if ids[0] != open {
		t.Fatalf("the call does not start with the <tool_call> token: %v", ids[:3])
	}
	end, _ := tok.TokenID("<|im_end|>")
	m := NewTokenTable(g, v).NewMatcher([]int32{end})
	mask := make([]uint64, v.Words())
	for _, id := range append(ids, end) {
		if err := m.Mask(mask); err != nil || !hasBit(mask, id) {
			t.Fatalf("token %d (%q) refused (%v)", id, tok.TokenBytes(id), err)
		}
		if err := m.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ToolCalls("nope", tools, 1, Options{}); err == nil {
		t.Fatal("an unsupported syntax compiled")
	}
}

// TestMaskPartsAnyCut: the parallel walk gives the brute-force mask for
// any cut of the vocabulary, including cuts inside shared prefixes.
func TestMaskPartsAnyCut(t *testing.T) {
	g, err := CompileSchema([]byte(personSchema), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok := loadTok(t, "tokenizers/llama3_1")
	v := NewVocab(tok, tok.VocabSize())
	cc := newCharClasses(g.d)
	for _, workers := range []int{1, 3, 7, 13} {
		v.parts = splitParts(len(v.ids), workers, 1)
		for _, prefix := range []string{``, `{"name": "Ad`, `{"name": "A", "age": 1, "address": {"city": "Lon`, `{"name": "A", "age": 1`} {
			s := g.walk(g.d.start, []byte(prefix))
			got := make([]uint64, v.Words())
			v.mask(g.d, s, cc, got)
			want := bruteMask(g, v, s)
			for w := range want {
				if got[w] != want[w] {
					t.Fatalf("%d parts, after %q: word %d = %x, brute force %x", workers, prefix, w, got[w], want[w])
				}
			}
		}
	}
}

// fakeTokens is a vocabulary of the given byte strings; id 0 is EOS.
type fakeTokens []string

func (f fakeTokens) VocabSize() int             { return len(f) }
func (f fakeTokens) TokenBytes(id int32) []byte { return []byte(f[id]) }
func (f fakeTokens) IsSpecial(id int32) bool    { return id == 0 }

// TestVocabularyCannotSpell: a vocabulary without '}' cannot close an
// object: the matcher says so (ErrNoToken) where the brace is needed,
// rather than letting anything through.
func TestVocabularyCannotSpell(t *testing.T) {
	g, err := CompileSchema([]byte(`{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := NewVocab(fakeTokens{"</s>", "{", `"a"`, ":", "true", "false", " "}, 7)
	m := NewTokenTable(g, v).NewMatcher([]int32{0})
	mask := make([]uint64, v.Words())
	for _, id := range []int32{1, 2, 3, 4} {
		if err := m.Mask(mask); err != nil || !hasBit(mask, id) {
			t.Fatalf("token %d refused (%v)", id, err)
		}
		if err := m.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Mask(mask); !errors.Is(err, ErrNoToken) {
		t.Fatalf("Mask = %v, want ErrNoToken", err)
	}
	if err := m.Accept(0); err == nil {
		t.Fatal("EOS accepted before the value is complete")
	}
}
