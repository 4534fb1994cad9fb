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
	mergesRaw    []byte
}

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
			raw, err := r.skipValue()
			rf.mergesRaw = raw
			return err
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

func (rf *rawFile) buildBPE() (*bpeModel, []string, error) {
	switch rf.modelType {
	case "BPE":
	case "":
		// Older files omit the type; BPE is recognised by its merges.
		if rf.mergesRaw == nil {
			return nil, nil, errors.New("model has no type and no merges")
		}
	default:
		return nil, nil, fmt.Errorf("unsupported model type %q", rf.modelType)
	}
	if !rf.vocabIsObj {
		return nil, nil, errors.New("BPE model vocab is not an object")
	}
	var opt bpeOptions
	obj := make(map[string]json.RawMessage, len(rf.modelRaw))
	for k, raw := range rf.modelRaw {
		obj[k] = raw
	}
	if b, err := json.Marshal(obj); err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	} else if err := json.Unmarshal(b, &opt); err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	if opt.Dropout != nil && *opt.Dropout > 0 {
		// Dropout is a training-time regulariser; inference ignores it.
		opt.Dropout = nil
	}

	arena := string(rf.vocabArena)
	m := &bpeModel{
		vocab:        make(map[string]int32, len(rf.vocabEntries)),
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
	maxID := int32(-1)
	for _, e := range rf.vocabEntries {
		if e.id > maxID {
			maxID = e.id
		}
	}
	idToTok := make([]string, maxID+1)
	for _, e := range rf.vocabEntries {
		s := arena[e.off : e.off+e.n]
		m.vocab[s] = e.id
		idToTok[e.id] = s
	}
	if opt.UnkToken != nil {
		id, ok := m.vocab[*opt.UnkToken]
		if !ok {
			return nil, nil, fmt.Errorf("unk_token %q is not in the vocabulary", *opt.UnkToken)
		}
		m.unkID = id
	}
	if err := m.parseMerges(rf.mergesRaw); err != nil {
		return nil, nil, err
	}
	m.init()
	return m, idToTok, nil
}

// parseMerges accepts both spellings: "a b" strings and ["a", "b"] pairs.
func (m *bpeModel) parseMerges(raw []byte) error {
	if raw == nil {
		m.merges = map[uint64]uint64{}
		return nil
	}
	r := &jsonReader{data: raw}
	if err := r.expect('['); err != nil {
		return fmt.Errorf("merges: %w", err)
	}
	type kv struct{ k, v uint64 }
	entries := make([]kv, 0, len(raw)/12)
	var a, b, joined []byte
	lookup := func(s []byte) (int32, error) {
		id, ok := m.vocab[string(s)]
		if !ok {
			return 0, fmt.Errorf("merge token %q is not in the vocabulary", s)
		}
		return id, nil
	}
	rank := 0
	for !r.next(']') {
		if rank > 0 {
			if err := r.expect(','); err != nil {
				return fmt.Errorf("merges: %w", err)
			}
		}
		var err error
		switch r.peek() {
		case '"':
			var s []byte
			s, err = r.readStringView()
			if err != nil {
				return fmt.Errorf("merges: %w", err)
			}
			sp := bytes.IndexByte(s, ' ')
			if sp < 0 {
				return fmt.Errorf("merge %q has no space", s)
			}
			a = append(a[:0], s[:sp]...)
			b = append(b[:0], s[sp+1:]...)
		case '[':
			r.pos++
			if a, err = r.appendString(a[:0]); err == nil {
				if err = r.expect(','); err == nil {
					if b, err = r.appendString(b[:0]); err == nil {
						err = r.expect(']')
					}
				}
			}
			if err != nil {
				return fmt.Errorf("merges: %w", err)
			}
		default:
			return fmt.Errorf("merges: %w", r.errorf("expected string or pair"))
		}
		ida, err := lookup(a)
		if err != nil {
			return err
		}
		idb, err := lookup(b)
		if err != nil {
			return err
		}
		rest := b
		if len(m.prefix) > 0 && len(rest) >= len(m.prefix) {
			rest = rest[len(m.prefix):]
		}
		joined = append(append(joined[:0], a...), rest...)
		idn, err := lookup(joined)
		if err != nil {
			return err
		}
		entries = append(entries, kv{pairKey(ida, idb), uint64(rank)<<32 | uint64(uint32(idn))})
		rank++
	}
	m.merges = make(map[uint64]uint64, len(entries))
	for _, e := range entries {
		m.merges[e.k] = e.v // a repeated pair keeps its last rank, as HF's map
	}
	return nil
}
