package grammar

import (
	"testing"

	"github.com/mlxcel/mlxcel/internal/sample"
)

// benchTokenizers are the real vocabularies of the benchmarks: Llama 3
// (128256 tokens) and Qwen 3 (151669).
var benchTokenizers = []string{"llama3_1", "qwen3"}

// benchSetup tokenizes personDoc with a real tokenizer.
func benchSetup(b *testing.B, name string) (*Grammar, *Vocab, []int32, int32) {
	b.Helper()
	tok := loadTok(b, "tokenizers/"+name)
	g, err := CompileSchema([]byte(personSchema), Options{})
	if err != nil {
		b.Fatal(err)
	}
	ids, err := tok.Encode(personDoc, false)
	if err != nil {
		b.Fatal(err)
	}
	eos, _ := tok.EOS()
	return g, NewVocab(tok, tok.VocabSize()), append(ids, eos), eos
}

// run decodes ids once through a matcher: Mask then Accept per token.
func run(b *testing.B, tt *TokenTable, ids []int32, eos int32, mask []uint64) {
	m := tt.NewMatcher([]int32{eos})
	for _, id := range ids {
		if err := m.Mask(mask); err != nil {
			b.Fatal(err)
		}
		if err := m.Accept(id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMaskWarm is the steady state: the states' masks are cached
// (any earlier request with the same schema), per token.
func BenchmarkMaskWarm(b *testing.B) {
	for _, name := range benchTokenizers {
		b.Run(name, func(b *testing.B) {
			g, v, ids, eos := benchSetup(b, name)
			tt := NewTokenTable(g, v)
			mask := make([]uint64, v.Words())
			run(b, tt, ids, eos, mask)
			b.ResetTimer()
			for b.Loop() {
				run(b, tt, ids, eos, mask)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids))/1e3, "us/token")
		})
	}
}

// BenchmarkMaskCold is a first request: every state's mask is computed
// on first use, per token of the document.
func BenchmarkMaskCold(b *testing.B) {
	for _, name := range benchTokenizers {
		b.Run(name, func(b *testing.B) {
			g, v, ids, eos := benchSetup(b, name)
			mask := make([]uint64, v.Words())
			b.ResetTimer()
			for b.Loop() {
				run(b, NewTokenTable(g, v), ids, eos, mask)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids))/1e3, "us/token")
		})
	}
}

// BenchmarkStateMask is one state's mask computed from scratch: the walk
// over the sorted vocabulary: inside a string of at most 40 characters
// (the widest mask; each position is its own state), inside an unbounded
// string (a state looping on itself: most tokens need no walk) and after
// '{'.
func BenchmarkStateMask(b *testing.B) {
	g, v, _, _ := benchSetup(b, "llama3_1")
	for _, c := range []struct{ name, prefix string }{
		{"in-bounded-string", `{"name": "Ad`},
		{"in-string", `{"name": "A", "age": 1, "address": {"city": "Lon`},
		{"after-brace", `{`},
	} {
		s := g.walk(g.d.start, []byte(c.prefix))
		cc := newCharClasses(g.d)
		out := make([]uint64, v.Words())
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				clear(out)
				v.mask(g.d, s, cc, out)
			}
		})
	}
}

func BenchmarkCompileSchema(b *testing.B) {
	for b.Loop() {
		if _, err := CompileSchema([]byte(personSchema), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMaskApply is the per-token work on the sampling path of a
// constrained sequence at steady state: the cached mask copied and
// applied to a Qwen 3 logit row (151669) (sample.ApplyMask), inside a string
// (where the mask allows most of the vocabulary, the slowest case).
func BenchmarkMaskApply(b *testing.B) {
	g, v, _, eos := benchSetup(b, "qwen3")
	tt := NewTokenTable(g, v)
	m := tt.NewMatcher([]int32{eos})
	for _, c := range []byte(`{"name": "Ad`) {
		m.state = g.d.next(m.state, c)
	}
	mask := make([]uint64, v.Words())
	logits := make([]float32, v.Size())
	for b.Loop() {
		if err := m.Mask(mask); err != nil {
			b.Fatal(err)
		}
		sample.ApplyMask(logits, mask)
	}
}

// BenchmarkNewVocab is the per-model cost of laying out a vocabulary.
func BenchmarkNewVocab(b *testing.B) {
	tok := loadTok(b, "tokenizers/qwen3")
	for b.Loop() {
		NewVocab(tok, tok.VocabSize())
	}
}

// BenchmarkContentSplit is the once-per-vocabulary cost of a content
// split (split.go): a JSON string's characters, and a pattern's
// [a-z0-9.] (most of the vocabulary left to walk), over Llama 3.
func BenchmarkContentSplit(b *testing.B) {
	g, v, _, _ := benchSetup(b, "llama3_1")
	cc := newCharClasses(g.d)
	for _, c := range []struct{ name, prefix string }{
		{"string", `{"name": "Ad`},
		{"pattern", `{"name": "A", "age": 1, "email": "a`},
	} {
		r, _ := g.d.contentRun(g.walk(g.d.start, []byte(c.prefix)), v.maxLen, cc)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				new(split).build(v, r.key)
			}
		})
	}
}
