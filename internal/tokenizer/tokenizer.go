// Package tokenizer loads Hugging Face tokenizer.json files (BPE models:
// byte-level like GPT-2 / Llama 3 / Qwen, and SentencePiece-style like
// Llama 2 / Gemma) and encodes and decodes text exactly as the HF
// tokenizers library does.
//
// Encoding follows HF's pipeline: added tokens are split out of the raw
// text, the rest is normalized, added tokens are split out again in the
// normalized text, the pre-tokenizer cuts words, the BPE model turns each
// word into ids, and the post-processor adds special tokens.
package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Tokenizer is safe for concurrent use.
type Tokenizer struct {
	model      *bpeModel
	normalizer normalizer
	pre        preTokenizer
	post       *postProcessor
	decoder    decoder

	rawAdded  *addedSet // added tokens matched before normalization
	normAdded *addedSet // ... and after

	idToToken []string
	known     []bool // id has a token
	special   []bool // token is special (decode's skip set)
	addedIDs  map[string]int32

	bos, eos       int32
	hasBOS, hasEOS bool

	slots int
	pool  sync.Pool
}

// encState is the per-call scratch space of Encode.
type encState struct {
	bpe   bpeScratch
	bufs  [][]byte
	spans [][]span
}

func build(rf *rawFile) (*Tokenizer, error) {
	t := &Tokenizer{}
	model, idToTok, known, err := rf.buildBPE()
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	t.model = model

	var slots slotAlloc
	if raw := rf.sections["normalizer"]; !isNull(raw) {
		if t.normalizer, err = parseNormalizer(raw); err != nil {
			return nil, fmt.Errorf("normalizer: %w", err)
		}
	}
	if raw := rf.sections["pre_tokenizer"]; !isNull(raw) {
		if t.pre, err = parsePreTokenizer(raw, &slots); err != nil {
			return nil, fmt.Errorf("pre_tokenizer: %w", err)
		}
	}
	t.slots = slots.n
	if raw := rf.sections["decoder"]; !isNull(raw) {
		if t.decoder, err = parseDecoder(raw); err != nil {
			return nil, fmt.Errorf("decoder: %w", err)
		}
	}

	var added []addedToken
	if raw := rf.sections["added_tokens"]; !isNull(raw) {
		if err := json.Unmarshal(raw, &added); err != nil {
			return nil, fmt.Errorf("added_tokens: %w", err)
		}
	}
	if err := t.setVocab(idToTok, known, added); err != nil {
		return nil, err
	}
	if raw := rf.sections["post_processor"]; !isNull(raw) {
		if t.post, err = parsePostProcessor(raw, t.addedOrModelID); err != nil {
			return nil, fmt.Errorf("post_processor: %w", err)
		}
		for _, id := range append(slices.Clone(t.post.prefix), t.post.suffix...) {
			if id < 0 || int(id) >= len(t.idToToken) {
				return nil, fmt.Errorf("post_processor: token id %d is outside the vocabulary of %d tokens", id, len(t.idToToken))
			}
		}
	}
	if t.post != nil {
		if len(t.post.prefix) > 0 {
			t.bos, t.hasBOS = t.post.prefix[0], true
		}
		if len(t.post.suffix) > 0 {
			t.eos, t.hasEOS = t.post.suffix[len(t.post.suffix)-1], true
		}
	}
	t.pool.New = func() any {
		return &encState{bufs: make([][]byte, t.slots), spans: make([][]span, t.slots)}
	}
	return t, nil
}

func (t *Tokenizer) setVocab(idToTok []string, known []bool, added []addedToken) error {
	n := len(idToTok)
	limit := maxIDSpace(len(idToTok) + len(added))
	for _, a := range added {
		if a.ID < 0 {
			return fmt.Errorf("added token %q has negative id", a.Content)
		}
		if int64(a.ID) >= limit {
			return fmt.Errorf("added_tokens: id %d of %q is out of range for a vocabulary of %d tokens", a.ID, a.Content, len(idToTok)+len(added))
		}
		if int(a.ID) >= n {
			n = int(a.ID) + 1
		}
	}
	t.idToToken = make([]string, n)
	t.known = make([]bool, n)
	t.special = make([]bool, n)
	copy(t.idToToken, idToTok)
	copy(t.known, known)
	t.addedIDs = make(map[string]int32, len(added))
	specialSet := map[string]bool{}
	// Specials first, then the rest, as HF orders its matching patterns.
	ordered := make([]*addedToken, 0, len(added))
	for i := range added {
		if added[i].Special {
			ordered = append(ordered, &added[i])
		}
	}
	for i := range added {
		if !added[i].Special {
			ordered = append(ordered, &added[i])
		}
	}
	var rawToks, normToks []*addedToken
	var rawPats, normPats []string
	for _, a := range ordered {
		if a.Content == "" {
			continue
		}
		t.idToToken[a.ID] = a.Content
		t.known[a.ID] = true
		t.addedIDs[a.Content] = a.ID
		if a.Special {
			specialSet[a.Content] = true
		}
		if a.Normalized {
			pat := a.Content
			if t.normalizer != nil {
				pat = string(t.normalizer.normalize([]byte(pat)))
			}
			normToks, normPats = append(normToks, a), append(normPats, pat)
		} else {
			rawToks, rawPats = append(rawToks, a), append(rawPats, a.Content)
		}
	}
	t.rawAdded = newAddedSet(rawToks, rawPats)
	t.normAdded = newAddedSet(normToks, normPats)
	// HF skips special tokens by content, whichever id spells them.
	for id, tok := range t.idToToken {
		if t.known[id] && specialSet[tok] {
			t.special[id] = true
		}
	}
	return nil
}

func (t *Tokenizer) addedOrModelID(tok string) (int32, bool) {
	if id, ok := t.addedIDs[tok]; ok {
		return id, true
	}
	return t.model.vocab.getString(tok)
}

// putState pools st again, without the scratch of a huge text: the pool
// would keep hundreds of MB alive after one large request.
func (t *Tokenizer) putState(st *encState) {
	if cap(st.bpe.syms) > 1<<16 {
		st.bpe.syms, st.bpe.heap = nil, nil
	}
	t.pool.Put(st)
}

// Encode turns text into ids. With addSpecial the post-processor adds its
// special tokens (BOS etc.). Special tokens written in the text are always
// recognised, as HF does.
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]int32, error) {
	st := t.pool.Get().(*encState)
	defer t.putState(st)
	s := []byte(text)
	ids := make([]int32, 0, len(s)/4+4)
	tokenize := func(p []byte, _ bool) { ids = t.model.tokenize(&st.bpe, p, ids) }
	t.rawAdded.split(s, func(a, b int) {
		seg := s[a:b]
		if t.normalizer != nil {
			seg = t.normalizer.normalize(seg)
		}
		first := a == 0
		t.normAdded.split(seg, func(c, d int) {
			piece := seg[c:d]
			if t.pre == nil {
				tokenize(piece, first && c == 0)
				return
			}
			t.pre.split(st, piece, first && c == 0, tokenize)
		}, func(id int32) { ids = append(ids, id) })
	}, func(id int32) { ids = append(ids, id) })
	if addSpecial && t.post != nil {
		ids = t.post.apply(ids)
	}
	return ids, nil
}

// Decode turns ids back into text like HF's decode; ids that are not in
// the vocabulary are skipped. Like the HF tokenizers library (and unlike
// transformers' clean_up_tokenization_spaces) no spacing cleanup is done.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if tok, ok := t.decodeToken(id, skipSpecial); ok {
			toks = append(toks, tok)
		}
	}
	if t.decoder == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(t.decoder.decodeChain(toks), "")
}

func (t *Tokenizer) decodeToken(id int32, skipSpecial bool) (string, bool) {
	if id < 0 || int(id) >= len(t.idToToken) || !t.known[id] {
		return "", false
	}
	if skipSpecial && t.special[id] {
		return "", false
	}
	return t.idToToken[id], true
}

// VocabSize is one more than the largest id (model vocabulary and added
// tokens), i.e. the number of rows an embedding table needs.
func (t *Tokenizer) VocabSize() int { return len(t.idToToken) }

// TokenString returns the raw vocabulary piece of id ("" if unknown).
func (t *Tokenizer) TokenString(id int32) string {
	if id < 0 || int(id) >= len(t.idToToken) {
		return ""
	}
	return t.idToToken[id]
}

// TokenID looks up a raw vocabulary piece (added tokens first).
func (t *Tokenizer) TokenID(piece string) (int32, bool) { return t.addedOrModelID(piece) }

// BOS is tokenizer_config.json's bos_token, else the special token the
// post-processor puts before the text.
func (t *Tokenizer) BOS() (int32, bool) { return t.bos, t.hasBOS }

// EOS is tokenizer_config.json's eos_token, else the special token the
// post-processor puts after the text.
func (t *Tokenizer) EOS() (int32, bool) { return t.eos, t.hasEOS }

// IsSpecial reports whether id is a special token (skipped by Decode with
// skipSpecial).
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

// SpecialTokens lists the ids of all special tokens in ascending order.
func (t *Tokenizer) SpecialTokens() []int32 {
	var out []int32
	for id, s := range t.special {
		if s {
			out = append(out, int32(id))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// tokenConfig is the part of tokenizer_config.json used here.
type tokenConfig struct {
	BOS            json.RawMessage `json:"bos_token"`
	EOS            json.RawMessage `json:"eos_token"`
	AddBOS         *bool           `json:"add_bos_token"`
	AddEOS         *bool           `json:"add_eos_token"`
	TokenizerClass string          `json:"tokenizer_class"`
}

// configToken reads a token given as a string or as {"content": ...};
// present is false when the key is absent, ok false when it is null.
func configToken(raw json.RawMessage) (tok string, present, ok bool, err error) {
	if raw == nil {
		return "", false, false, nil
	}
	if isNull(raw) {
		return "", true, false, nil
	}
	if err := json.Unmarshal(raw, &tok); err == nil {
		return tok, true, true, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", true, false, errors.New("token is neither a string nor {\"content\": ...}")
	}
	return *obj.Content, true, true, nil
}

func (t *Tokenizer) applyConfig(data []byte) error {
	var c tokenConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	for _, x := range []struct {
		raw  json.RawMessage
		name string
		id   *int32
		has  *bool
	}{{c.BOS, "bos_token", &t.bos, &t.hasBOS}, {c.EOS, "eos_token", &t.eos, &t.hasEOS}} {
		tok, present, ok, err := configToken(x.raw)
		if err != nil {
			return fmt.Errorf("%s: %w", x.name, err)
		}
		if !present {
			continue
		}
		*x.has = false
		if ok {
			id, found := t.addedOrModelID(tok)
			if !found {
				return fmt.Errorf("%s %q is not in the vocabulary", x.name, tok)
			}
			*x.id, *x.has = id, true
		}
	}
	// transformers rebuilds the post-processor of Llama and Gemma
	// tokenizers from add_bos_token / add_eos_token; honour them when the
	// config states either explicitly.
	switch strings.TrimSuffix(c.TokenizerClass, "Fast") {
	case "LlamaTokenizer", "CodeLlamaTokenizer", "GemmaTokenizer":
		if c.AddBOS == nil && c.AddEOS == nil {
			break
		}
		addBOS, addEOS := true, false
		if c.AddBOS != nil {
			addBOS = *c.AddBOS
		}
		if c.AddEOS != nil {
			addEOS = *c.AddEOS
		}
		p := &postProcessor{}
		if addBOS && t.hasBOS {
			p.prefix = []int32{t.bos}
		}
		if addEOS && t.hasEOS {
			p.suffix = []int32{t.eos}
		}
		t.post = p
	}
	return nil
}
