package tokenizer

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const minimalModel = `{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}`

func writeTokenizer(t *testing.T, fields map[string]string) string {
	t.Helper()
	parts := []string{`"version":"1.0"`, `"added_tokens":[]`}
	for _, k := range []string{"normalizer", "pre_tokenizer", "post_processor", "decoder", "model"} {
		v, ok := fields[k]
		if !ok {
			v = "null"
			if k == "model" {
				v = minimalModel
			}
		}
		parts = append(parts, `"`+k+`":`+v)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, []byte("{"+strings.Join(parts, ",")+"}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUnknownComponentErrors(t *testing.T) {
	for _, tc := range []struct {
		field, value, want string
	}{
		{"pre_tokenizer", `{"type":"FancySplit"}`, `"FancySplit"`},
		{"pre_tokenizer", `{"type":"Sequence","pretokenizers":[{"type":"ByteLevel"},{"type":"Mystery"}]}`, `"Mystery"`},
		{"model", `{"type":"Unigram","vocab":[["a",0.0]]}`, `"Unigram"`},
		{"model", `{"type":"WordPiece","vocab":{"a":0}}`, `"WordPiece"`},
		{"decoder", `{"type":"CTC"}`, `"CTC"`},
		{"decoder", `{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Nope"}]}`, `"Nope"`},
		{"normalizer", `{"type":"Precompiled","precompiled_charsmap":""}`, `"Precompiled"`},
		{"post_processor", `{"type":"Whatever"}`, `"Whatever"`},
		{"pre_tokenizer", `{"type":"Split","pattern":{"Regex":"a(?=b)"},"behavior":"Isolated","invert":false}`, `a(?=b)`},
	} {
		path := writeTokenizer(t, map[string]string{tc.field: tc.value})
		_, err := LoadFile(path)
		if err == nil {
			t.Errorf("%s %s: no error", tc.field, tc.value)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) || !strings.Contains(msg, path) || !strings.Contains(msg, tc.field) {
			t.Errorf("%s: error %q should name %s, the field and the file", tc.field, msg, tc.want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("missing tokenizer.json: no error")
	}
	path := writeTokenizer(t, map[string]string{"model": `{"type":"BPE","vocab":{"a":0},"merges":["a b"]}`})
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("merge with unknown token: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(bad, []byte(`{"model": {"type":"BPE","vocab":{"a":0,`), 0o644)
	if _, err := LoadFile(bad); err == nil {
		t.Error("truncated JSON: no error")
	}
}

func TestMinimalTokenizer(t *testing.T) {
	tk, err := LoadFile(writeTokenizer(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := tk.Encode("abba", false)
	// No pre-tokenizer: one word; "a b" merges once, the rest stay.
	if want := []int32{2, 1, 0}; !sameIDs(ids, want) {
		t.Fatalf("Encode = %v, want %v", ids, want)
	}
	// No decoder: tokens are joined with spaces, as HF does.
	if got := tk.Decode(ids, false); got != "ab b a" {
		t.Fatalf("Decode = %q", got)
	}
	if _, ok := tk.BOS(); ok {
		t.Error("BOS without config or post-processor")
	}
}

// TestHugeIDs: one id of 10^9 in a small vocabulary (or among the added
// tokens) is refused at load, naming the file and the token, instead of
// allocating tables for a billion ids.
func TestHugeIDs(t *testing.T) {
	for _, tc := range []struct {
		model, added, want string
	}{
		{`{"type":"BPE","vocab":{"a":0,"b":1,"ab":1000000000},"merges":["a b"]}`, `[]`, `"ab"`},
		{minimalModel, `[{"id":1000000000,"content":"<x>","special":true}]`, `"<x>"`},
	} {
		path := filepath.Join(t.TempDir(), "tokenizer.json")
		body := `{"version":"1.0","added_tokens":` + tc.added + `,"normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":null,"model":` + tc.model + `}`
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := LoadFile(path)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "1000000000") || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("error %v, want the id, the token %s and the file", err, tc.want)
		}
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<20 {
			t.Errorf("loading allocated %d MB", grown>>20)
		}
	}
}
