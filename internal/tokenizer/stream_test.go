package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// streamAll feeds ids one at a time and returns the pieces.
func streamAll(tk *Tokenizer, ids []int32, skip bool) []string {
	sd := tk.NewStreamDecoder(skip)
	var pieces []string
	for _, id := range ids {
		pieces = append(pieces, sd.Add(id))
	}
	return append(pieces, sd.Flush())
}

func checkStream(t *testing.T, tk *Tokenizer, ids []int32, skip bool) {
	t.Helper()
	pieces := streamAll(tk, ids, skip)
	for _, p := range pieces {
		if !utf8.ValidString(p) {
			t.Fatalf("ids %v: piece %q is not valid UTF-8", ids, p)
		}
	}
	got, want := strings.Join(pieces, ""), tk.Decode(ids, skip)
	if got != want {
		t.Fatalf("ids %v (skip=%v):\nstream %q\ndecode %q\npieces %q", ids, skip, got, want, pieces)
	}
}

// idPools collects interesting ids: single-byte tokens (byte-level
// alphabet or <0xNN>), specials, and everything else.
type idPools struct {
	bytes   [256]int32 // -1 if the tokenizer has no token for that byte
	special []int32
}

func poolsFor(tk *Tokenizer) idPools {
	var p idPools
	for b := 0; b < 256; b++ {
		p.bytes[b] = -1
		if id, ok := tk.TokenID(fmt.Sprintf("<0x%02X>", b)); ok {
			p.bytes[b] = id
		} else if id, ok := tk.TokenID(byteToUTF8[b]); ok {
			p.bytes[b] = id
		}
	}
	p.special = tk.SpecialTokens()
	return p
}

var streamTexts = []string{
	"Hello, world! 叫 日本語のテキスト 🦙🚀👍🏽 Привет", "é combining", "  x\n\n  y  ",
	"def f(x):\n    return x * 2\n", "½ ∑ √ 中文测试", "ſ 'll", "\t\ttabs",
}

// randomIDs mixes arbitrary ids, byte tokens spelling whole or broken
// UTF-8 sequences, specials and encoded text.
func randomIDs(r *rand.Rand, tk *Tokenizer, p idPools) []int32 {
	var ids []int32
	n := 1 + r.IntN(12)
	for k := 0; k < n; k++ {
		switch r.IntN(6) {
		case 0:
			ids = append(ids, int32(r.IntN(tk.VocabSize()+3))-1)
		case 1: // a multi-byte character spelled byte by byte
			var buf [4]byte
			c := []rune("é叫🦙€ß\u0301")[r.IntN(6)]
			m := utf8.EncodeRune(buf[:], c)
			for _, b := range buf[:m] {
				if p.bytes[b] >= 0 {
					ids = append(ids, p.bytes[b])
				}
			}
		case 2: // stray bytes: truncated or invalid sequences
			for j := r.IntN(3); j >= 0; j-- {
				if id := p.bytes[0x80+r.IntN(128)]; id >= 0 {
					ids = append(ids, id)
				}
			}
		case 3:
			if len(p.special) > 0 {
				ids = append(ids, p.special[r.IntN(len(p.special))])
			}
		case 4: // spaces and ASCII bytes
			if id := p.bytes[" \nab"[r.IntN(4)]]; id >= 0 {
				ids = append(ids, id)
			}
		default:
			enc, _ := tk.Encode(streamTexts[r.IntN(len(streamTexts))], r.IntN(2) == 0)
			ids = append(ids, enc...)
		}
	}
	return ids
}

// TestStreamMatchesDecode is the property test: for random id sequences the
// concatenated stream pieces equal Decode of the whole sequence.
func TestStreamMatchesDecode(t *testing.T) {
	for name := range tokenizerDirs {
		t.Run(name, func(t *testing.T) {
			tk := loadNamed(t, name)
			p := poolsFor(tk)
			r := rand.New(rand.NewPCG(1, uint64(len(name))))
			for i := 0; i < 3000; i++ {
				checkStream(t, tk, randomIDs(r, tk, p), r.IntN(2) == 0)
			}
		})
	}
}

// TestStreamEmitsEarly checks text comes out as soon as it is final.
func TestStreamEmitsEarly(t *testing.T) {
	t.Run("byte-level", func(t *testing.T) {
		tk := loadNamed(t, "llama3_1")
		p := poolsFor(tk)
		hello, _ := tk.Encode("Hello", false)
		ids := append(hello, p.bytes[0xE5], p.bytes[0x8F], p.bytes[0xAB])
		got := streamAll(tk, ids, true)
		want := []string{"Hello", "", "", "叫", ""}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("pieces %q, want %q", got, want)
		}
	})
	t.Run("sentencepiece", func(t *testing.T) {
		tk := loadNamed(t, "stories260k")
		ids, _ := tk.Encode("Once upon a time", true)
		got := streamAll(tk, ids, true)
		if got[1] != "Once" || strings.Join(got, "") != "Once upon a time" || got[len(got)-1] != "" {
			t.Fatalf("pieces %q", got)
		}
		for i, s := range got[1 : len(got)-1] {
			if s == "" {
				t.Fatalf("piece %d empty: %q", i+1, got)
			}
		}
	})
	t.Run("byte-fallback run", func(t *testing.T) {
		tk := loadNamed(t, "gemma3")
		p := poolsFor(tk)
		a, _ := tk.TokenID("a")
		// The run is only final once a normal token closes it, since a
		// later invalid byte would turn the whole run into U+FFFD.
		got := streamAll(tk, []int32{p.bytes[0xE5], p.bytes[0x8F], p.bytes[0xAB], a}, false)
		want := []string{"", "", "", "叫a", ""}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("pieces %q, want %q", got, want)
		}
		got = streamAll(tk, []int32{p.bytes[0xE5], p.bytes[0x8F], p.bytes[0xAB], p.bytes[0xE5], a}, false)
		if j := strings.Join(got, ""); j != "\uFFFD\uFFFD\uFFFD\uFFFDa" {
			t.Fatalf("invalid run streamed as %q", j)
		}
	})
}

func TestStreamFlushResets(t *testing.T) {
	tk := loadNamed(t, "stories260k")
	ids, _ := tk.Encode("Hello there", false)
	sd := tk.NewStreamDecoder(true)
	for round := 0; round < 2; round++ {
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(sd.Add(id))
		}
		b.WriteString(sd.Flush())
		if b.String() != "Hello there" {
			t.Fatalf("round %d: %q", round, b.String())
		}
	}
}

// syntheticTokenizer writes a small tokenizer.json exercising decoder
// steps the reference tokenizers do not use.
func syntheticTokenizer(t *testing.T, decoder string) *Tokenizer {
	t.Helper()
	vocab := `{"<unk>":0,"<s>":1,"▁":2,"a":3,"b":4,"▁a":5,"xy":6,"x":7,"y":8,"  ":9," ":10,"<0xE5>":11,"<0x8F>":12,"<0xAB>":13,"<0xC3>":14,"<0xA9>":15,"ab":16}`
	js := `{"version":"1.0","added_tokens":[{"id":1,"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],
"normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":` + decoder + `,
"model":{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"byte_fallback":true,"vocab":` + vocab + `,"merges":["a b"]}}`
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	tk, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestStreamSyntheticDecoders(t *testing.T) {
	decoders := map[string]string{
		"none":          `null`,
		"strip-both":    `{"type":"Strip","content":" ","start":2,"stop":1}`,
		"fuse-strip":    `{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":2,"stop":2}]}`,
		"metaspace":     `{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}`,
		"metaspace-nv":  `{"type":"Metaspace","replacement":"▁","prepend_scheme":"never","split":true}`,
		"replace-multi": `{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Replace","pattern":{"String":"xyx"},"content":"Z"}]}`,
		"replace-regex": `{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Replace","pattern":{"Regex":"a+"},"content":"A"}]}`,
		"bytelevel":     `{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}`,
		"fallback-meta": `{"type":"Sequence","decoders":[{"type":"ByteFallback"},{"type":"Metaspace","replacement":"▁","add_prefix_space":true}]}`,
	}
	for name, dec := range decoders {
		t.Run(name, func(t *testing.T) {
			tk := syntheticTokenizer(t, dec)
			r := rand.New(rand.NewPCG(7, uint64(len(name))))
			for i := 0; i < 3000; i++ {
				ids := make([]int32, r.IntN(10))
				for j := range ids {
					ids[j] = int32(r.IntN(tk.VocabSize()))
				}
				checkStream(t, tk, ids, r.IntN(2) == 0)
			}
		})
	}
}
