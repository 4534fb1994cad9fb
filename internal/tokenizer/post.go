package tokenizer

import (
	"encoding/json"
	"fmt"
)

// postProcessor adds special tokens around a single sequence. Every
// supported HF post-processor reduces to a fixed prefix and suffix for one
// sequence (pairs are not supported by this API).
type postProcessor struct {
	prefix, suffix []int32
}

func (p *postProcessor) apply(ids []int32) []int32 {
	if len(p.prefix) == 0 && len(p.suffix) == 0 {
		return ids
	}
	out := make([]int32, 0, len(p.prefix)+len(ids)+len(p.suffix))
	out = append(out, p.prefix...)
	out = append(out, ids...)
	return append(out, p.suffix...)
}

func parsePostProcessor(raw []byte, lookup func(string) (int32, bool)) (*postProcessor, error) {
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "ByteLevel":
		// Only trims offsets, which this package does not report.
		return &postProcessor{}, nil
	case "TemplateProcessing":
		var c struct {
			Single []struct {
				SpecialToken *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
				Sequence *struct {
					ID string `json:"id"`
				} `json:"Sequence"`
			} `json:"single"`
			SpecialTokens map[string]struct {
				IDs []int32 `json:"ids"`
			} `json:"special_tokens"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		p := &postProcessor{}
		seen := false
		for _, piece := range c.Single {
			switch {
			case piece.Sequence != nil:
				if seen {
					return nil, fmt.Errorf("TemplateProcessing: single template has two sequences")
				}
				seen = true
			case piece.SpecialToken != nil:
				st, ok := c.SpecialTokens[piece.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("TemplateProcessing: missing special token %q", piece.SpecialToken.ID)
				}
				if seen {
					p.suffix = append(p.suffix, st.IDs...)
				} else {
					p.prefix = append(p.prefix, st.IDs...)
				}
			}
		}
		return p, nil
	case "RobertaProcessing", "BertProcessing":
		var c struct {
			Sep [2]json.RawMessage `json:"sep"`
			Cls [2]json.RawMessage `json:"cls"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		var sep, cls int32
		if err := json.Unmarshal(c.Sep[1], &sep); err != nil {
			return nil, fmt.Errorf("%s sep: %w", typ, err)
		}
		if err := json.Unmarshal(c.Cls[1], &cls); err != nil {
			return nil, fmt.Errorf("%s cls: %w", typ, err)
		}
		return &postProcessor{prefix: []int32{cls}, suffix: []int32{sep}}, nil
	case "Sequence":
		var c struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		p := &postProcessor{}
		for _, r := range c.Processors {
			q, err := parsePostProcessor(r, lookup)
			if err != nil {
				return nil, err
			}
			// Each processor wraps the result of the previous one.
			p.prefix = append(append([]int32{}, q.prefix...), p.prefix...)
			p.suffix = append(p.suffix, q.suffix...)
		}
		return p, nil
	}
	return nil, fmt.Errorf("unsupported post_processor type %q", typ)
}
