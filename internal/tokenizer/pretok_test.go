package tokenizer

import (
	"fmt"
	"testing"
)

// Expectations in this file are the HF tokenizers pre-tokenizer unit tests.

func runPre(p preTokenizer, slots int, in string, first bool) []string {
	st := &encState{bufs: make([][]byte, slots), spans: make([][]span, slots)}
	var out []string
	p.split(st, []byte(in), first, func(b []byte, _ bool) { out = append(out, string(b)) })
	return out
}

func expectPieces(t *testing.T, name string, got, want []string) {
	t.Helper()
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("%s:\n got %q\nwant %q", name, got, want)
	}
}

func TestSplitBehaviors(t *testing.T) {
	space := " "
	for beh, want := range map[behavior][]string{
		behRemoved:            {"How", "are", "you", "doing?"},
		behIsolated:           {"How", " ", "are", " ", "you", " ", "doing?"},
		behMergedWithPrevious: {"How ", "are ", "you ", "doing?"},
		behMergedWithNext:     {"How", " are", " you", " doing?"},
		behContiguous:         {"How", " ", "are", " ", "you", " ", "doing?"},
	} {
		m, _ := newMatcher(pattern{String: &space})
		got := runPre(&splitter{m: m, beh: beh}, 1, "How are you doing?", true)
		expectPieces(t, fmt.Sprint("behavior ", beh), got, want)
	}
	// Inverted: the pattern marks what to keep.
	re := `\w+`
	m, _ := newMatcher(pattern{Regex: &re})
	got := runPre(&splitter{m: m, beh: behRemoved, invert: true}, 1, "Hey, man!", true)
	expectPieces(t, "inverted Removed", got, []string{"Hey", "man"})
	got = runPre(&splitter{m: m, beh: behMergedWithPrevious, invert: true}, 1, "Hey, man!", true)
	expectPieces(t, "inverted MergedWithPrevious", got, []string{"Hey, ", "man!"})
}

func TestDigitsPre(t *testing.T) {
	p, err := parsePreTokenizer([]byte(`{"type":"Digits","individual_digits":true}`), &slotAlloc{})
	if err != nil {
		t.Fatal(err)
	}
	expectPieces(t, "individual", runPre(p, 1, "Hey 123 friend!", true), []string{"Hey ", "1", "2", "3", " friend!"})
	p, _ = parsePreTokenizer([]byte(`{"type":"Digits","individual_digits":false}`), &slotAlloc{})
	expectPieces(t, "contiguous", runPre(p, 1, "Hey 123 friend!", true), []string{"Hey ", "123", " friend!"})
}

func TestWhitespacePre(t *testing.T) {
	expectPieces(t, "Whitespace", runPre(whitespacePre{}, 0, "Hey man!", true), []string{"Hey", "man", "!"})
	expectPieces(t, "Whitespace", runPre(whitespacePre{}, 0, "How are you doing?", true),
		[]string{"How", "are", "you", "doing", "?"})
	expectPieces(t, "WhitespaceSplit", runPre(whitespaceSplitPre{}, 0, "Hey man!", true), []string{"Hey", "man!"})
}

func TestMetaspacePre(t *testing.T) {
	always := &metaspacePre{repl: []byte("▁"), prepend: prependAlways, doSplit: true}
	expectPieces(t, "basic", runPre(always, 1, "Hey friend!", true), []string{"▁Hey", "▁friend!"})
	expectPieces(t, "multiple spaces", runPre(always, 1, "Hey   friend!", true),
		[]string{"▁Hey", "▁", "▁", "▁friend!"})

	// prepend_scheme "first" only prepends on the piece at offset 0; the
	// HF test splits "<s>" out first.
	first := &metaspacePre{repl: []byte("▁"), prepend: prependFirst}
	var got []string
	for i, piece := range []string{"Hey my friend ", "<s>", "how▁are you"} {
		got = append(got, runPre(first, 1, piece, i == 0)...)
	}
	expectPieces(t, "first", got, []string{"▁Hey▁my▁friend▁", "<s>", "how▁are▁you"})
	got = nil
	for i, piece := range []string{" Hey ", "<s>", "how ", "<s>", "are ", "<s>", " you"} {
		got = append(got, runPre(first, 1, piece, i == 0)...)
	}
	expectPieces(t, "first, leading space", got, []string{"▁Hey▁", "<s>", "how▁", "<s>", "are▁", "<s>", "▁you"})
}

func TestByteLevelPre(t *testing.T) {
	p, err := parsePreTokenizer([]byte(`{"type":"ByteLevel","add_prefix_space":true,"use_regex":true}`), &slotAlloc{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ĠHello", "Ġmy", "Ġfriend", ",", "Ġhow", "Ġis", "Ġyour", "Ġday", "Ġgoing", "?"}
	for _, in := range []string{" Hello my friend, how is your day going?", "Hello my friend, how is your day going?"} {
		expectPieces(t, "add_prefix_space", runPre(p, 2, in, true), want)
	}
	p, _ = parsePreTokenizer([]byte(`{"type":"ByteLevel","add_prefix_space":false,"use_regex":true}`), &slotAlloc{})
	expectPieces(t, "char split up", runPre(p, 2, "i⭢j", true), []string{"i", "âŃ¢", "j"})
}
