package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Load reads dir/tokenizer.json and, when present, dir/tokenizer_config.json.
func Load(dir string) (*Tokenizer, error) {
	t, err := LoadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(cfgPath)
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, err
	}
	if err := t.applyConfig(data); err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	return t, nil
}

// LoadFile reads a tokenizer.json without its tokenizer_config.json.
func LoadFile(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := parseTokenizerJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// rawFile holds the top-level sections; the model's vocab and merges are
// parsed by hand (see jsonReader), everything else with encoding/json.
type rawFile struct {
	sections map[string][]byte
	// model
	modelType    string
	modelRaw     map[string][]byte
	vocabArena   []byte
	vocabEntries []vocabEntry
	vocabIsObj   bool
	hasMerges    bool
	mergeText    []byte // a then b of every merge, back to back
	mergeList    []mergeText
}

type mergeText struct{ off, alen, blen uint32 }

type vocabEntry struct {
	off, n uint32
	id     int32
}

func parseTokenizerJSON(data []byte) (*Tokenizer, error) {
	rf := &rawFile{sections: map[string][]byte{}, modelRaw: map[string][]byte{}}
	r := &jsonReader{data: data}
	err := r.forEachKey(func(key []byte) error {
		if string(key) == "model" {
			return rf.parseModel(r)
		}
		k := string(key)
		raw, err := r.skipValue()
		rf.sections[k] = raw
		return err
	})
	if err != nil {
		return nil, err
	}
	return build(rf)
}

func (rf *rawFile) parseModel(r *jsonReader) error {
	return r.forEachKey(func(key []byte) error {
		switch k := string(key); k {
		case "vocab":
			if r.peek() != '{' {
				// Unigram spells its vocab as a list; the type check
				// after parsing reports it.
				_, err := r.skipValue()
				return err
			}
			rf.vocabIsObj = true
			return rf.parseVocab(r)
		case "merges":
			rf.hasMerges = true
			return rf.parseMergeText(r)
		default:
			raw, err := r.skipValue()
			if err != nil {
				return err
			}
			rf.modelRaw[k] = raw
			if k == "type" {
				return json.Unmarshal(raw, &rf.modelType)
			}
			return nil
		}
	})
}

func (rf *rawFile) parseVocab(r *jsonReader) error {
	// Keys go into one arena so the whole vocabulary costs one string.
	rf.vocabArena = make([]byte, 0, len(r.data)/8)
	rf.vocabEntries = make([]vocabEntry, 0, 1024)
	return r.forEachKey(func(key []byte) error {
		off := len(rf.vocabArena)
		rf.vocabArena = append(rf.vocabArena, key...)
		id, err := r.readInt()
		if err != nil {
			return err
		}
		if id < 0 || id > 1<<30 {
			return fmt.Errorf("vocab id %d out of range", id)
		}
		rf.vocabEntries = append(rf.vocabEntries, vocabEntry{uint32(off), uint32(len(key)), int32(id)})
		return nil
	})
}

type bpeOptions struct {
	Dropout                 *float64 `json:"dropout"`
	UnkToken                *string  `json:"unk_token"`
	ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	FuseUnk                 bool     `json:"fuse_unk"`
	ByteFallback            bool     `json:"byte_fallback"`
	IgnoreMerges            bool     `json:"ignore_merges"`
}

func (rf *rawFile) buildBPE() (*bpeModel, []string, []bool, error) {
	switch rf.modelType {
	case "BPE":
	case "":
		// Older files omit the type; BPE is recognised by its merges.
		if !rf.hasMerges {
			return nil, nil, nil, errors.New("model has no type and no merges")
		}
	default:
		return nil, nil, nil, fmt.Errorf("unsupported model type %q", rf.modelType)
	}
	if !rf.vocabIsObj {
		return nil, nil, nil, errors.New("BPE model vocab is not an object")
	}
	var opt bpeOptions
	obj := make(map[string]json.RawMessage, len(rf.modelRaw))
	for k, raw := range rf.modelRaw {
		obj[k] = raw
	}
	if b, err := json.Marshal(obj); err != nil {
		return nil, nil, nil, fmt.Errorf("model: %w", err)
	} else if err := json.Unmarshal(b, &opt); err != nil {
		return nil, nil, nil, fmt.Errorf("model: %w", err)
	}
	if opt.Dropout != nil && *opt.Dropout > 0 {
		// Dropout is a training-time regulariser; inference ignores it.
		opt.Dropout = nil
	}

	m := &bpeModel{
		unkID:        -1,
		fuseUnk:      opt.FuseUnk,
		byteFallback: opt.ByteFallback,
		ignoreMerges: opt.IgnoreMerges,
	}
	if opt.ContinuingSubwordPrefix != nil {
		m.prefix = *opt.ContinuingSubwordPrefix
	}
	if opt.EndOfWordSuffix != nil {
		m.suffix = *opt.EndOfWordSuffix
	}
	if err := rf.checkIDs(); err != nil {
		return nil, nil, nil, err
	}
	idToTok, known := rf.buildVocab(m)
	if opt.UnkToken != nil {
		id, ok := m.vocab.getString(*opt.UnkToken)
		if !ok {
			return nil, nil, nil, fmt.Errorf("unk_token %q is not in the vocabulary", *opt.UnkToken)
		}
		m.unkID = id
	}
	if err := m.resolveMerges(rf.mergeText, rf.mergeList); err != nil {
		return nil, nil, nil, err
	}
	m.init()
	return m, idToTok, known, nil
}

// maxIDSpace bounds the id space against the number of tokens: tables are
// indexed by id, so one id of 10^9 in a small vocabulary would allocate
// gigabytes. Real vocabularies are dense; twice the tokens (plus room for
// reserved ranges) is far beyond any of them.
func maxIDSpace(tokens int) int64 { return 2*int64(tokens) + 1024 }

// checkIDs refuses vocabulary ids beyond maxIDSpace.
func (rf *rawFile) checkIDs() error {
	limit := maxIDSpace(len(rf.vocabEntries))
	for _, e := range rf.vocabEntries {
		if int64(e.id) >= limit {
			return fmt.Errorf("vocab: id %d of token %q is out of range for a vocabulary of %d tokens",
				e.id, rf.vocabArena[e.off:e.off+e.n], len(rf.vocabEntries))
		}
	}
	return nil
}

// buildVocab turns the parsed entries into the id -> token slice and the
// lookup table; every token is a substring of one arena string.
func (rf *rawFile) buildVocab(m *bpeModel) ([]string, []bool) {
	arena := string(rf.vocabArena)
	maxID := int32(-1)
	for _, e := range rf.vocabEntries {
		maxID = max(maxID, e.id)
	}
	idToTok := make([]string, maxID+1)
	known := make([]bool, maxID+1)
	for _, e := range rf.vocabEntries {
		idToTok[e.id] = arena[e.off : e.off+e.n]
		known[e.id] = true
	}
	m.vocab = newStrTable(idToTok, len(rf.vocabEntries))
	for _, e := range rf.vocabEntries {
		m.vocab.put(e.id)
	}
	return idToTok, known
}

// parseMergeText decodes the merges list; both spellings are accepted:
// "a b" strings and ["a", "b"] pairs. Ids are resolved later, once the
// vocabulary and the continuing-subword prefix are known.
func (rf *rawFile) parseMergeText(r *jsonReader) error {
	if err := r.expect('['); err != nil {
		return fmt.Errorf("merges: %w", err)
	}
	text := make([]byte, 0, (len(r.data)-r.pos)/2)
	var list []mergeText
	for !r.next(']') {
		if len(list) > 0 {
			if err := r.expect(','); err != nil {
				return fmt.Errorf("merges: %w", err)
			}
		}
		off := len(text)
		var err error
		switch r.peek() {
		case '"':
			var s []byte
			if s, err = r.readStringView(); err != nil {
				return fmt.Errorf("merges: %w", err)
			}
			sp := bytes.IndexByte(s, ' ')
			if sp < 0 {
				return fmt.Errorf("merge %q has no space", s)
			}
			text = append(append(text, s[:sp]...), s[sp+1:]...)
			list = append(list, mergeText{uint32(off), uint32(sp), uint32(len(s) - sp - 1)})
			continue
		case '[':
			r.pos++
			if text, err = r.appendString(text); err == nil {
				alen := len(text) - off
				if err = r.expect(','); err == nil {
					if text, err = r.appendString(text); err == nil {
						err = r.expect(']')
						list = append(list, mergeText{uint32(off), uint32(alen), uint32(len(text) - off - alen)})
					}
				}
			}
			if err != nil {
				return fmt.Errorf("merges: %w", err)
			}
		default:
			return fmt.Errorf("merges: %w", r.errorf("expected string or pair"))
		}
	}
	rf.mergeText, rf.mergeList = text, list
	return nil
}

// resolveMerges turns merge text into id pairs, in batches so that the
// table lookups' cache misses overlap (see strTable.getBatch).
func (m *bpeModel) resolveMerges(text []byte, list []mergeText) error {
	m.merges = newPairTable(len(list))
	const batch = 32
	var keys [3 * batch][]byte
	var ids [3 * batch]int32
	var joined [batch][]byte
	for lo := 0; lo < len(list); lo += batch {
		hi := min(lo+batch, len(list))
		for i := lo; i < hi; i++ {
			e := list[i]
			a := text[e.off : e.off+e.alen]
			b := text[e.off+e.alen : e.off+e.alen+e.blen]
			j := text[e.off : e.off+e.alen+e.blen]
			if len(m.prefix) > 0 && len(b) >= len(m.prefix) {
				joined[i-lo] = append(append(joined[i-lo][:0], a...), b[len(m.prefix):]...)
				j = joined[i-lo]
			}
			k := 3 * (i - lo)
			keys[k], keys[k+1], keys[k+2] = a, b, j
		}
		n := 3 * (hi - lo)
		m.vocab.getBatch(keys[:n], ids[:n])
		for i := lo; i < hi; i++ {
			k := 3 * (i - lo)
			for x := k; x < k+3; x++ {
				if ids[x] < 0 {
					return fmt.Errorf("merge %d: token %q is not in the vocabulary", i, keys[x])
				}
			}
			// A repeated pair keeps its last rank, as HF's map does.
			m.merges.put(pairKey(ids[k], ids[k+1]), uint64(i)<<32|uint64(uint32(ids[k+2])))
		}
	}
	return nil
}
