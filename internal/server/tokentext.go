package server

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/mlxcel/mlxcel/internal/tokenizer"
)

// tokenTexts gives the text of single tokens for logprobs, cached.
//
// Decoding one token alone loses what a decoder does at the start of a
// string: SentencePiece-style decoders strip the leading space of "▁the",
// so "the" would be reported where the output reads " the". Decoding the
// token after a fixed prefix token and cutting the prefix's text off
// keeps that space, the way the text appears mid-sequence.
type tokenTexts struct {
	tok        *tokenizer.Tokenizer
	prefix     []int32
	prefixText string
	cache      sync.Map // int32 -> string
	quoted     sync.Map // int32 -> []byte, the text as a JSON string
}

func newTokenTexts(tok *tokenizer.Tokenizer) *tokenTexts {
	t := &tokenTexts{tok: tok}
	if ids, err := tok.Encode("a", false); err == nil && len(ids) > 0 {
		t.prefix = ids
		t.prefixText = tok.Decode(ids, false)
	}
	return t
}

// text is the token's text as it reads inside a sequence; special tokens
// are shown (logprobs report what was sampled, EOS included).
func (t *tokenTexts) text(id int32) string {
	if v, ok := t.cache.Load(id); ok {
		return v.(string)
	}
	s := t.tok.Decode([]int32{id}, false)
	if len(t.prefix) > 0 {
		full := t.tok.Decode(append(append([]int32(nil), t.prefix...), id), false)
		if rest, ok := strings.CutPrefix(full, t.prefixText); ok {
			s = rest
		}
	}
	t.cache.Store(id, s)
	return s
}

// jsonText is text(id) as a JSON string, cached: /tokenize with pieces
// writes one per token, millions for a large body.
func (t *tokenTexts) jsonText(id int32) []byte {
	if v, ok := t.quoted.Load(id); ok {
		return v.([]byte)
	}
	b, _ := json.Marshal(t.text(id))
	t.quoted.Store(id, b)
	return b
}
