package server

import "github.com/mlxcel/mlxcel/internal/tokenizer"

// Early rejection of prompts that cannot fit the context. Tokenizing a
// 15 MiB text costs seconds of CPU and hundreds of MB, only to refuse it
// for having more tokens than the context. No token is longer than the
// vocabulary's longest token string (token strings are at least as long
// as the bytes they decode to: byte-level and SentencePiece spellings
// only grow them), so a text longer than context x longest token cannot
// fit. The factor of 4 leaves room for normalizers that shrink a text
// (NFKC turns 3-byte full-width letters into 1-byte ones).

// maxPromptBytes is the longest text that might still fit ctx tokens.
func maxPromptBytes(tok *tokenizer.Tokenizer, ctx int) int64 {
	longest := 1
	for id := range tok.VocabSize() {
		longest = max(longest, len(tok.TokenString(int32(id))))
	}
	return 4 * int64(ctx) * int64(longest)
}

// textTooLong refuses texts whose total length rules out fitting the
// context, before they are rendered or tokenized.
func (m *served) textTooLong(param string, texts ...string) *apiError {
	var n int64
	for _, t := range texts {
		n += int64(len(t))
	}
	if m.promptBytes <= 0 || n <= m.promptBytes {
		return nil
	}
	return badRequest(param, "This model's maximum context length is %d tokens, but the prompt is %d bytes of text, "+
		"more than that many tokens can hold.", m.eng.MaxContext(), n)
}
