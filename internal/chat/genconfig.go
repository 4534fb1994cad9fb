package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
)

// GenerationConfig holds what a model's generation_config.json says about
// stopping and default sampling. A nil pointer means the file does not set
// that field, so the caller's own default applies.
type GenerationConfig struct {
	EOSTokenIDs       []int32
	BOSTokenID        *int32
	PadTokenID        *int32
	Temperature       *float64
	TopP              *float64
	TopK              *int
	RepetitionPenalty *float64
	DoSample          *bool
	MaxNewTokens      *int
	// MaxLength caps prompt plus completion, the older way some models
	// bound generation; MaxNewTokens wins when both are set.
	MaxLength *int
	// Ignored lists values that were out of range and dropped, one line
	// each naming the file and key: a default that a request could never
	// send would otherwise fail every request that omits the field.
	Ignored []string
}

// LoadGenerationConfig reads dir/generation_config.json. A missing file is
// the zero value and no error: many models ship none.
func LoadGenerationConfig(dir string) (GenerationConfig, error) {
	p := filepath.Join(dir, "generation_config.json")
	fields, err := readJSONObject(p)
	if err != nil || fields == nil {
		return GenerationConfig{}, err
	}
	var gc GenerationConfig
	errs := []error{}
	note := func(key string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	gc.EOSTokenIDs, err = tokenIDs(fields["eos_token_id"])
	note("eos_token_id", err)
	gc.BOSTokenID, err = singleTokenID(fields["bos_token_id"])
	note("bos_token_id", err)
	gc.PadTokenID, err = singleTokenID(fields["pad_token_id"])
	note("pad_token_id", err)
	gc.Temperature, err = optFloat(fields["temperature"])
	note("temperature", err)
	gc.TopP, err = optFloat(fields["top_p"])
	note("top_p", err)
	gc.TopK, err = optInt(fields["top_k"])
	note("top_k", err)
	gc.RepetitionPenalty, err = optFloat(fields["repetition_penalty"])
	note("repetition_penalty", err)
	gc.MaxNewTokens, err = optInt(fields["max_new_tokens"])
	note("max_new_tokens", err)
	gc.MaxLength, err = optInt(fields["max_length"])
	note("max_length", err)
	if raw := fields["do_sample"]; !isNull(raw) {
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			note("do_sample", errors.New("not a boolean"))
		} else {
			gc.DoSample = &b
		}
	}
	if len(errs) > 0 {
		return GenerationConfig{}, fmt.Errorf("chat: %s: %w", p, errors.Join(errs...))
	}
	gc.dropOutOfRange(p)
	return gc, nil
}

// dropOutOfRange clears sampling defaults outside the ranges a request
// may use (sample.Params.Validate's), noting each in Ignored.
func (gc *GenerationConfig) dropOutOfRange(path string) {
	drop := func(key string, v any, want string) {
		gc.Ignored = append(gc.Ignored, fmt.Sprintf("%s: %s %v is out of range (%s); ignored", path, key, v, want))
	}
	bad := func(f *float64, lo, hi float64, open bool) bool {
		return f != nil && (math.IsNaN(*f) || *f < lo || *f > hi || (open && *f == lo))
	}
	if bad(gc.Temperature, 0, 2, false) {
		drop("temperature", *gc.Temperature, "0 to 2")
		gc.Temperature = nil
	}
	if bad(gc.TopP, 0, 1, true) {
		drop("top_p", *gc.TopP, "above 0, at most 1")
		gc.TopP = nil
	}
	if gc.TopK != nil && *gc.TopK < -1 {
		drop("top_k", *gc.TopK, "-1, 0 or more")
		gc.TopK = nil
	}
	if bad(gc.RepetitionPenalty, 0, math.MaxFloat64, true) {
		drop("repetition_penalty", *gc.RepetitionPenalty, "above 0")
		gc.RepetitionPenalty = nil
	}
	if gc.MaxNewTokens != nil && *gc.MaxNewTokens < 1 {
		drop("max_new_tokens", *gc.MaxNewTokens, "at least 1")
		gc.MaxNewTokens = nil
	}
	if gc.MaxLength != nil && *gc.MaxLength < 1 {
		drop("max_length", *gc.MaxLength, "at least 1")
		gc.MaxLength = nil
	}
}

// StopTokenIDs gathers every token id that ends generation: eos_token_id from
// generation_config.json, then from config.json (top level, and the nested
// text_config that multimodal models use), then tokenizerEOS. Each source
// may hold one id or a list (Llama 3 lists both <|eot_id|> and
// <|end_of_text|>); the result keeps first-seen order without repeats.
// Missing files contribute nothing.
func StopTokenIDs(dir string, tokenizerEOS []int32) ([]int32, error) {
	var ids []int32
	seen := map[int32]bool{}
	add := func(list []int32) {
		for _, id := range list {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}

	gc, err := LoadGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	add(gc.EOSTokenIDs)

	p := filepath.Join(dir, "config.json")
	cfg, err := readJSONObject(p)
	if err != nil {
		return nil, err
	}
	top, err := tokenIDs(cfg["eos_token_id"])
	if err != nil {
		return nil, fmt.Errorf("chat: %s: eos_token_id: %w", p, err)
	}
	add(top)
	if tc := cfg["text_config"]; !isNull(tc) {
		var text map[string]json.RawMessage
		if err := json.Unmarshal(tc, &text); err != nil {
			return nil, fmt.Errorf("chat: %s: text_config: %w", p, err)
		}
		nested, err := tokenIDs(text["eos_token_id"])
		if err != nil {
			return nil, fmt.Errorf("chat: %s: text_config.eos_token_id: %w", p, err)
		}
		add(nested)
	}

	add(tokenizerEOS)
	return ids, nil
}

// readJSONObject reads a JSON object file; a missing file is (nil, nil).
func readJSONObject(p string) (map[string]json.RawMessage, error) {
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("chat: parse %s: %w", p, err)
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool {
	return raw == nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// tokenIDs reads an id field that may be null, one integer or a list.
func tokenIDs(raw json.RawMessage) ([]int32, error) {
	if isNull(raw) {
		return nil, nil
	}
	if id, err := singleTokenID(raw); err == nil {
		return []int32{*id}, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("want a token id or a list of them")
	}
	out := make([]int32, 0, len(list))
	for _, item := range list {
		id, err := singleTokenID(item)
		if err != nil {
			return nil, err
		}
		if id == nil {
			return nil, errors.New("null in a token id list")
		}
		out = append(out, *id)
	}
	return out, nil
}

func singleTokenID(raw json.RawMessage) (*int32, error) {
	if isNull(raw) {
		return nil, nil
	}
	// json.Number would also take a quoted "2"; transformers would not.
	var n json.Number
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] == '"' || json.Unmarshal(t, &n) != nil {
		return nil, errors.New("want a token id")
	}
	id, err := tokenID(n)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

func tokenID(n json.Number) (int32, error) {
	i, err := n.Int64()
	if err != nil || i < 0 || i > math.MaxInt32 {
		return 0, fmt.Errorf("%s is not a token id", n)
	}
	return int32(i), nil
}

func optFloat(raw json.RawMessage) (*float64, error) {
	if isNull(raw) {
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, errors.New("not a number")
	}
	return &f, nil
}

// optInt accepts an integral number in any spelling ("50" or "50.0"): some
// configs are written from Python floats.
func optInt(raw json.RawMessage) (*int, error) {
	f, err := optFloat(raw)
	if f == nil || err != nil {
		return nil, err
	}
	if *f != math.Trunc(*f) || math.Abs(*f) > math.MaxInt32 {
		return nil, fmt.Errorf("%v is not an integer", *f)
	}
	i := int(*f)
	return &i, nil
}
