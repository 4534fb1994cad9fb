package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegexFallbackMatchesScanners compares two independent
// implementations of the same patterns: the hand-written scanners and the
// RE2 rewrite with lookahead emulation used for unknown patterns.
func TestRegexFallbackMatchesScanners(t *testing.T) {
	texts := append([]string{}, streamTexts...)
	data, err := os.ReadFile(filepath.Join(sharedTestdata, "llamacpp", "ggml-vocab-llama-bpe.gguf.inp"))
	if err != nil {
		t.Fatalf("llama.cpp cases missing (../shared/testdata): %v", err)
	}
	texts = append(texts, strings.Split(string(data), "\n__ggml_vocab_test__\n")...)
	alphabet := []rune("aZé日本 \t\n\r\v\u3000\u00a0\u2028.,!?'sStT7٣½-_ \u0301🦙ſ\x00")
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 3000; i++ {
		rs := make([]rune, r.IntN(20))
		for j := range rs {
			rs[j] = alphabet[r.IntN(len(alphabet))]
		}
		texts = append(texts, string(rs))
	}
	for _, tc := range []struct {
		name, pattern string
		scanner       matcher
	}{
		{"llama3", llama3Pattern, llama3Scanner{3}},
		{"qwen2", qwen2Pattern, llama3Scanner{1}},
		{"gpt2", gpt2Pattern, gpt2Scanner{}},
	} {
		fallback, err := compileOnig(tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, ok := fallback.(*lookaheadMatcher); !ok {
			t.Fatalf("%s: fallback is %T", tc.name, fallback)
		}
		for _, s := range texts {
			got, want := pieces(fallback, s), pieces(tc.scanner, s)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				t.Errorf("%s %q:\nfallback %q\n scanner %q", tc.name, s, got, want)
			}
		}
	}
}

func TestOnigRewrite(t *testing.T) {
	for in, want := range map[string]string{
		`\s+`:          `[` + onigSpace + `]+`,
		`[^\s\p{L}]`:   `[^` + onigSpace + `\p{L}]`,
		`\d{1,3}|\D`:   `\p{Nd}{1,3}|\P{Nd}`,
		`[]a\s]`:       `[]a` + onigSpace + `]`,
		`\\s`:          `\\s`,
		`(?i:'s|'t)\S`: `(?i:'s|'t)[^` + onigSpace + `]`,
	} {
		got, err := onigToRE2(in)
		if err != nil || got != want {
			t.Errorf("onigToRE2(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := compileOnig(`a(?=b)`); err == nil {
		t.Error("lookahead outside the known suffix should not compile")
	}
}

// TestRegexFallbackGolden runs the Llama 3 golden cases with the split
// pattern respelled so that it no longer matches the hand-written
// scanner's text and goes through the RE2 fallback instead.
func TestRegexFallbackGolden(t *testing.T) {
	dir := filepath.Join(sharedTestdata, tokenizerDirs["llama3_1"])
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	old := `|\\p{N}{1,3}|`
	if !strings.Contains(string(data), old) {
		t.Fatal("pattern not found in tokenizer.json")
	}
	data = []byte(strings.Replace(string(data), old, `|(?:\\p{N}{1,3})|`, 1))
	tk, err := parseTokenizerJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tk.pre.(seqPre)[0].(*splitter).m.(*lookaheadMatcher); !ok {
		t.Fatal("respelled pattern did not use the fallback")
	}
	raw, err := os.ReadFile(filepath.Join(sharedTestdata, "tokenizers", "llama3_1.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	for i, c := range g.Cases {
		if ids, _ := tk.Encode(c.Text, false); !sameIDs(ids, c.IDs) {
			t.Errorf("case %d %q: %v, want %v", i, c.Text, ids, c.IDs)
		}
	}
}
