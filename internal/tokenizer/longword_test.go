package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLongWordCuts: merging long words in pieces cut where no merge can
// cross gives the ids of merging them whole, for every reference
// tokenizer (with a piece length of a few bytes, so that most words are
// cut, in every script of the golden cases).
func TestLongWordCuts(t *testing.T) {
	var texts []string
	for name := range tokenizerDirs {
		b, err := os.ReadFile(filepath.Join(sharedTestdata, "tokenizers", name+".golden.json"))
		if err != nil {
			continue
		}
		var g struct {
			Cases []struct {
				Text string `json:"text"`
			} `json:"cases"`
		}
		if json.Unmarshal(b, &g) == nil {
			for _, c := range g.Cases {
				texts = append(texts, c.Text)
			}
		}
	}
	story := strings.Repeat("Once upon a time,  there was a little girl named Lily.\n\"She\" liked to play; 東京 café 🙂 x=1+2\t", 40)
	texts = append(texts, story, strings.Join(texts, " "), strings.ReplaceAll(story, " ", ""))
	if len(texts) < 10 {
		t.Fatalf("only %d texts", len(texts))
	}
	defer func(n int) { longPiece = n }(longPiece)
	for name, dir := range tokenizerDirs {
		load := func() *Tokenizer {
			tk, err := Load(filepath.Join(sharedTestdata, dir))
			if err != nil {
				t.Fatal(err)
			}
			return tk
		}
		whole, cut := load(), load() // apart: the word cache must not carry results over
		for _, text := range texts {
			longPiece = 1 << 30
			want, _ := whole.Encode(text, true)
			longPiece = 4
			got, _ := cut.Encode(text, true)
			if !slicesEqual(got, want) {
				t.Fatalf("%s: %q: cut %v, whole %v", name, text[:min(len(text), 80)], got, want)
			}
		}
	}
}

func slicesEqual(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
