package tokenizer

import (
	"os"
	"testing"
)

// FuzzTokenizerJSON: any tokenizer.json either fails to load with an
// error or loads into a tokenizer that encodes and decodes without
// panicking, in bounded memory (ids are bounded by the vocabulary size).
func FuzzTokenizerJSON(f *testing.F) {
	stories, err := os.ReadFile("../defaultmodel/stories260k/tokenizer.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(stories)
	f.Add([]byte(`{"version":"1.0","added_tokens":[],"model":` + minimalModel + `}`))
	f.Add([]byte(`{"added_tokens":[{"id":3,"content":"<s>","special":true}],"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]],"byte_fallback":true},` +
		`"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false},"decoder":{"type":"ByteLevel"},` +
		`"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[3]}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := parseTokenizerJSON(data)
		if err != nil {
			return
		}
		if n := tok.VocabSize(); int64(n) > maxIDSpace(len(data)) {
			t.Fatalf("a %d-byte file gave a vocabulary of %d ids", len(data), n)
		}
		for _, s := range []string{"", "ab", "Once upon a time", "a\x00b ☃ <s>", "    \n\n"} {
			ids, err := tok.Encode(s, true)
			if err != nil {
				continue
			}
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside 0..%d", s, id, tok.VocabSize()-1)
				}
			}
			tok.Decode(ids, false)
			d := tok.NewStreamDecoder(true)
			for _, id := range ids {
				d.Add(id)
			}
		}
	})
}
