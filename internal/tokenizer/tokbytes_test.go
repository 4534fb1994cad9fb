package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenBytesConcatenate: the bytes of each token of a golden case,
// concatenated, are HF's decoded text (the reference), except that a
// SentencePiece stream's leading space, which the Strip or Metaspace
// decoder drops at the start, is kept (stripStart).
func TestTokenBytesConcatenate(t *testing.T) {
	for name, stripStart := range map[string]bool{"llama3_1": false, "qwen3": false, "gemma3": false, "mixtral": true} {
		t.Run(name, func(t *testing.T) {
			tk := loadNamed(t, name)
			data, err := os.ReadFile(filepath.Join(sharedTestdata, "tokenizers", name+".golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			var g goldenFile
			if err := json.Unmarshal(data, &g); err != nil {
				t.Fatal(err)
			}
			for _, c := range g.Cases {
				var b []byte
				for _, id := range c.IDs {
					b = append(b, tk.TokenBytes(id)...)
				}
				got := string(b)
				if stripStart {
					got = strings.TrimPrefix(got, " ")
				}
				if got != c.Decoded {
					t.Errorf("%q: token bytes give %q, HF decodes %q", c.Text, got, c.Decoded)
				}
			}
		})
	}
	if b := loadNamed(t, "llama3_1").TokenBytes(-1); b != nil {
		t.Errorf("TokenBytes(-1) = %q", b)
	}
}
