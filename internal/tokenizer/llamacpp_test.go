package tokenizer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLlamaCppVocab runs llama.cpp's tokenizer test cases (test-tokenizer-0
// .inp/.out pairs, ids without BOS) against the matching HF tokenizers.
// The ggml-vocab-llama-spm cases are not run: they need the original
// 32000-token Llama 2 vocabulary, and no tokenizer.json in the shared
// testdata has it (stories260k is a 512-token vocabulary and mixtral's is a
// stub).
func TestLlamaCppVocab(t *testing.T) {
	for _, tc := range []struct{ vocab, tokenizer string }{
		{"ggml-vocab-llama-bpe", "llama3_1"},
		{"ggml-vocab-qwen2", "qwen3"},
	} {
		t.Run(tc.vocab, func(t *testing.T) {
			base := filepath.Join(sharedTestdata, "llamacpp", tc.vocab+".gguf")
			inp, err := os.ReadFile(base + ".inp")
			if err != nil {
				t.Fatalf("llama.cpp cases missing (../shared/testdata): %v", err)
			}
			out, err := os.ReadFile(base + ".out")
			if err != nil {
				t.Fatal(err)
			}
			cases := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
			cases = cases[:len(cases)-1] // the file ends with a separator
			lines := strings.Split(string(out), "\n")
			lines = lines[:len(lines)-1]
			if len(cases) != 46 || len(lines) != len(cases) {
				t.Fatalf("%d cases, %d result lines; want 46 each", len(cases), len(lines))
			}
			tk := loadNamed(t, tc.tokenizer)
			pass := 0
			for i, text := range cases {
				var want []int32
				for _, f := range strings.Fields(lines[i]) {
					v, err := strconv.Atoi(f)
					if err != nil {
						t.Fatalf("line %d: %v", i, err)
					}
					want = append(want, int32(v))
				}
				got, err := tk.Encode(text, false)
				if err != nil {
					t.Fatal(err)
				}
				if sameIDs(got, want) {
					pass++
				} else {
					t.Errorf("case %d %q:\n got %v\nwant %v", i, text, got, want)
				}
			}
			t.Logf("%d/%d cases match", pass, len(cases))
		})
	}
}
