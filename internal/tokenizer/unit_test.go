package tokenizer

import (
	"fmt"
	"strings"
	"testing"
)

// Expected values in this file come from the HF tokenizers unit tests and
// from Python's bytes.decode(errors="replace").

func TestLossyUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"Hello \xF0\x90\x80World": "Hello \uFFFDWorld",
		"\xe2\x82\xff":            "\uFFFD\uFFFD",
		"\xed\xa0\x80":            "\uFFFD\uFFFD\uFFFD",
		"\xf4\x90\x80\x80":        "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xc0\xaf":                "\uFFFD\uFFFD",
		"\xe0\x80\xaf":            "\uFFFD\uFFFD\uFFFD",
		"\xf0\x9f\x98":            "\uFFFD",
		"a\xf0\x9f\x98\x81\x81":   "a😁\uFFFD",
		"plain ascii and 日本":      "plain ascii and 日本",
	} {
		if got := lossyString([]byte(in)); got != want {
			t.Errorf("lossy(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestByteMap(t *testing.T) {
	for b, want := range map[byte]rune{' ': 'Ġ', '\n': 'Ċ', 'a': 'a', 0: 'Ā', 0xAD: 'Ń', 0xFF: 'ÿ'} {
		if byteToRune[b] != want {
			t.Errorf("byte %#x -> %q, want %q", b, byteToRune[b], want)
		}
	}
}

func pieces(m matcher, s string) []string {
	var out []string
	prev := 0
	m.find([]byte(s), func(a, b int) {
		if a > prev {
			out = append(out, s[prev:a])
		}
		out = append(out, s[a:b])
		prev = b
	})
	if prev < len(s) {
		out = append(out, s[prev:])
	}
	return out
}

func TestScanners(t *testing.T) {
	for _, tc := range []struct {
		m    matcher
		in   string
		want []string
	}{
		// HF byte_level.rs pre-tokenization tests.
		{gpt2Scanner{}, "Hello my friend, how is your day going?",
			[]string{"Hello", " my", " friend", ",", " how", " is", " your", " day", " going", "?"}},
		{gpt2Scanner{}, "Hello there\nHello there", []string{"Hello", " there", "\n", "Hello", " there"}},
		{gpt2Scanner{}, "Hello there       dear", []string{"Hello", " there", "      ", " dear"}},
		{gpt2Scanner{}, "i⭢j", []string{"i", "⭢", "j"}},
		{gpt2Scanner{}, "it's 'S  ", []string{"it", "'s", " '", "S", "  "}},
		// Llama 3: case-insensitive contractions, a non-letter glued to
		// the word after it, numbers in threes, newlines ending runs.
		{llama3Scanner{3}, "I'M (x) 1234567  \n\n  y  ",
			[]string{"I", "'M", " (", "x", ")", " ", "123", "456", "7", "  \n\n", " ", " y", "  "}},
		{llama3Scanner{3}, "a.b!!\n\nc\td", []string{"a", ".b", "!!\n\n", "c", "\td"}},
		{llama3Scanner{1}, "x 42", []string{"x", " ", "4", "2"}},
	} {
		got := pieces(tc.m, tc.in)
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("%T %q:\n got %q\nwant %q", tc.m, tc.in, got, tc.want)
		}
	}
}

func TestDecoders(t *testing.T) {
	for _, tc := range []struct {
		d    decoder
		in   []string
		want []string
	}{
		{byteFallbackDec{}, []string{"Hey", "friend!"}, []string{"Hey", "friend!"}},
		{byteFallbackDec{}, []string{"<0x61>"}, []string{"a"}},
		{byteFallbackDec{}, []string{"<0xE5>"}, []string{"�"}},
		{byteFallbackDec{}, []string{"<0xE5>", "<0x8f>"}, []string{"�", "�"}},
		{byteFallbackDec{}, []string{"<0xE5>", "<0x8f>", "<0xab>"}, []string{"叫"}},
		{byteFallbackDec{}, []string{"<0xE5>", "<0x8f>", "<0xab>", "a"}, []string{"叫", "a"}},
		{byteFallbackDec{}, []string{"<0xE5>", "<0x8f>", "a"}, []string{"�", "�", "a"}},
		{metaspaceDec{'▁', true}, []string{"▁Hey", "▁friend!"}, []string{"Hey", " friend!"}},
		{metaspaceDec{'▁', false}, []string{"▁Hey", "▁friend!"}, []string{" Hey", " friend!"}},
		{byteLevelDec{}, []string{"Hello", "Ġthere", "Ġdear", "Ġfriend!", "Ġ", "[PA D]"},
			[]string{"Hello there dear friend! [PA D]"}},
		{stripDec{'H', 1, 0}, []string{"Hey", " friend!", "HHH"}, []string{"ey", " friend!", "HH"}},
		{stripDec{'y', 0, 1}, []string{"Hey", " friend!", "HHH"}, []string{"He", " friend!", "HHH"}},
		{fuseDec{}, []string{"Hey", " friend!"}, []string{"Hey friend!"}},
	} {
		got := tc.d.decodeChain(tc.in)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%T%v %q = %q, want %q", tc.d, tc.d, tc.in, got, tc.want)
		}
	}
}

func splitAdded(a *addedSet, s string) []string {
	var out []string
	a.split([]byte(s), func(x, y int) { out = append(out, s[x:y]) },
		func(id int32) { out = append(out, fmt.Sprintf("#%d", id)) })
	return out
}

// Cases from HF's added_vocabulary.rs tests (on already-lowercased text).
func TestAddedTokenOptions(t *testing.T) {
	mask := &addedToken{ID: 0, Content: "<mask>", SingleWord: true}
	a := newAddedSet([]*addedToken{mask}, []string{"<mask>"})
	got := splitAdded(a, "<mask> my name <mask> a<mask> <mask>ony <mask>")
	want := []string{"#0", " my name ", "#0", " a<mask> <mask>ony ", "#0"}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("single_word: got %q, want %q", got, want)
	}
	got = splitAdded(a, "<mask>, <mask>- ◌̰<mask>")
	want = []string{"#0", ", ", "#0", "- ◌̰<mask>"}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("single_word unicode: got %q, want %q", got, want)
	}

	strip := &addedToken{ID: 0, Content: "<mask>", SingleWord: true, LStrip: true, RStrip: true}
	a = newAddedSet([]*addedToken{strip}, []string{"<mask>"})
	got = splitAdded(a, "hi <mask> there\t<mask>\t<mask>\u2000")
	want = []string{"hi", "#0", "there", "#0", "#0"}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("lstrip/rstrip: got %q, want %q", got, want)
	}

	toks := []*addedToken{{ID: 1, Content: "[CLS]"}, {ID: 2, Content: "[SEP]"}, {ID: 3, Content: "my"}, {ID: 4, Content: "name"}}
	a = newAddedSet(toks, []string{"[CLS]", "[SEP]", "my", "name"})
	got = splitAdded(a, "[CLS] My name is Anthony [SEP]")
	want = []string{"#1", " My ", "#4", " is Anthony ", "#2"}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("extract: got %q, want %q", got, want)
	}
}

// Added tokens in the text are split out before normalization and
// pre-tokenization, and the BOS/EOS accessors read tokenizer_config.json.
func TestSpecialTokensInText(t *testing.T) {
	tk := loadNamed(t, "llama3_1")
	ids, _ := tk.Encode("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", true)
	want := []int32{128000, 128006, 882, 128007, 271, 13347, 128009}
	if !sameIDs(ids, want) {
		t.Errorf("Encode = %v, want %v", ids, want)
	}
	if got := tk.Decode(ids, false); got != "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" {
		t.Errorf("Decode = %q", got)
	}
	if got := tk.Decode(ids, true); got != "user\n\nHi" {
		t.Errorf("Decode(skip) = %q", got)
	}
	if id, ok := tk.BOS(); !ok || id != 128000 {
		t.Errorf("BOS = %d %v", id, ok)
	}
	if id, ok := tk.EOS(); !ok || id != 128009 {
		t.Errorf("EOS = %d %v", id, ok)
	}
	if !tk.IsSpecial(128009) || tk.IsSpecial(882) {
		t.Error("IsSpecial")
	}
	if tk.VocabSize() != 128256 || tk.TokenString(882) != "user" {
		t.Errorf("VocabSize %d, TokenString %q", tk.VocabSize(), tk.TokenString(882))
	}

	q := loadNamed(t, "qwen3")
	if _, ok := q.BOS(); ok {
		t.Error("qwen3 has bos_token null")
	}
	if id, ok := q.EOS(); !ok || q.TokenString(id) != "<|im_end|>" {
		t.Errorf("qwen3 EOS = %d", id)
	}
	g := loadNamed(t, "gemma3")
	if id, ok := g.BOS(); !ok || id != 2 {
		t.Errorf("gemma3 BOS = %d", id)
	}
	if g.VocabSize() != 262145 {
		t.Errorf("gemma3 VocabSize = %d", g.VocabSize())
	}
}

func TestParseIDs(t *testing.T) {
	for in, want := range map[string][]int32{
		"[1, 2,3]":   {1, 2, 3},
		" 1,2 3\n4 ": {1, 2, 3, 4},
		"128000":     {128000},
		"":           {},
		"[]":         {},
		"5,, 6":      {5, 6},
	} {
		got, err := ParseIDs(in)
		if err != nil || !sameIDs(got, want) {
			t.Errorf("ParseIDs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"1,x", "[1,", "1.5", "99999999999"} {
		if _, err := ParseIDs(bad); err == nil {
			t.Errorf("ParseIDs(%q): no error", bad)
		}
	}
}

// Encode shares a word cache and scratch pool between goroutines.
func TestConcurrentEncode(t *testing.T) {
	tk := loadNamed(t, "qwen3")
	texts := append([]string{}, streamTexts...)
	want := make([][]int32, len(texts))
	for i, s := range texts {
		want[i], _ = tk.Encode(s, true)
	}
	done := make(chan error)
	for g := 0; g < 4; g++ {
		go func(g int) {
			for i := 0; i < 200; i++ {
				k := (i + g) % len(texts)
				got, _ := tk.Encode(texts[k], true)
				if !sameIDs(got, want[k]) {
					done <- fmt.Errorf("goroutine %d: %q encoded differently", g, texts[k])
					return
				}
			}
			done <- nil
		}(g)
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
