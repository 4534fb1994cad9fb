package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// Reference data lives in the shared testdata checkout beside the repo.
const sharedTestdata = "../../../shared/testdata"

// tokenizerDirs maps each golden file to the directory of its tokenizer.
var tokenizerDirs = map[string]string{
	"llama3_1":    "tokenizers/llama3_1",
	"qwen3":       "tokenizers/qwen3",
	"gemma3":      "tokenizers/gemma3",
	"mixtral":     "tokenizers/mixtral",
	"stories260k": "models/stories260k",
}

var (
	loadMu sync.Mutex
	loaded = map[string]*Tokenizer{}
)

// loadNamed loads (once per test binary) one of the reference tokenizers.
func loadNamed(t testing.TB, name string) *Tokenizer {
	t.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if tk, ok := loaded[name]; ok {
		return tk
	}
	dir := filepath.Join(sharedTestdata, tokenizerDirs[name])
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("reference tokenizer missing (../shared/testdata): %v", err)
	}
	tk, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	loaded[name] = tk
	return tk
}

type goldenFile struct {
	Tokenizer  string `json:"tokenizer"`
	ProducedBy string `json:"produced_by"`
	Cases      []struct {
		Text           string  `json:"text"`
		IDs            []int32 `json:"ids"`
		IDsWithSpecial []int32 `json:"ids_with_special"`
		Decoded        string  `json:"decoded"`
	} `json:"cases"`
}

// TestGolden checks every case produced by the HF tokenizers library:
// encode without and with special tokens, and decode. The golden
// "decoded" is tokenizer.decode(ids) with the library's default
// skip_special_tokens=True, so it is checked both for ids and for
// ids_with_special (whose added BOS must then be skipped).
func TestGolden(t *testing.T) {
	for name := range tokenizerDirs {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(sharedTestdata, "tokenizers", name+".golden.json")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("golden file missing (../shared/testdata): %v", err)
			}
			var g goldenFile
			if err := json.Unmarshal(data, &g); err != nil {
				t.Fatal(err)
			}
			if len(g.Cases) == 0 {
				t.Fatal("no cases")
			}
			tk := loadNamed(t, name)
			for i, c := range g.Cases {
				ids, err := tk.Encode(c.Text, false)
				if err != nil {
					t.Fatalf("case %d %q: %v", i, c.Text, err)
				}
				if !sameIDs(ids, c.IDs) {
					t.Errorf("case %d %q: Encode = %v, want %v", i, c.Text, ids, c.IDs)
				}
				ids, _ = tk.Encode(c.Text, true)
				if !sameIDs(ids, c.IDsWithSpecial) {
					t.Errorf("case %d %q: Encode(special) = %v, want %v", i, c.Text, ids, c.IDsWithSpecial)
				}
				if got := tk.Decode(c.IDs, true); got != c.Decoded {
					t.Errorf("case %d %q: Decode(ids) = %q, want %q", i, c.Text, got, c.Decoded)
				}
				if got := tk.Decode(c.IDsWithSpecial, true); got != c.Decoded {
					t.Errorf("case %d %q: Decode(ids_with_special, skip) = %q, want %q", i, c.Text, got, c.Decoded)
				}
			}
		})
	}
}

func sameIDs(a, b []int32) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}
