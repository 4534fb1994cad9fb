package server

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
)

// The plain chat fallback.
//
// A model without a chat template gets 400 on /v1/chat/completions: there
// is no right way to format a conversation for it, and a made-up format
// would silently give poor answers. The exception is the embedded
// stories260k model and the tiny test fixtures, which are base models
// sharing one tokenizer and have no template at all: for them a chat
// request is rendered as the message contents joined by newlines, after a
// BOS token, so chat clients and tests can exercise the whole path on the
// default model. They are recognised by their tokenizer.json, which is
// byte-identical across all of them (a test pins the hash against the
// embedded copy).
const storiesTokenizerSHA256 = "122d22ca558413499eac24a0a4373c6ac76528aa97bd1f1a6a889214df0b254b"

// hasStoriesTokenizer reports whether dir holds the stories260k tokenizer.
func hasStoriesTokenizer(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) == storiesTokenizerSHA256
}

// plainChatPrompt renders the fallback: BOS, then the contents joined by
// "\n". The roles are dropped: a base model has no notion of them.
func (m *served) plainChatPrompt(texts []string) ([]int32, error) {
	ids, err := m.tok.Encode(strings.Join(texts, "\n"), false)
	if err != nil {
		return nil, err
	}
	if bos, ok := m.tok.BOS(); ok {
		ids = append([]int32{bos}, ids...)
	}
	return ids, nil
}
