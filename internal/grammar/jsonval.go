package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// jval is a parsed JSON value that keeps the order of object members: a
// schema's "properties" order is the order the matcher writes them in.
type jval struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys []string
	vals []*jval
	str  string // string value, or the number's text
	b    bool
}

func parseJSON(data []byte) (*jval, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readVal(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the schema")
	}
	return v, nil
}

func readVal(dec *json.Decoder) (*jval, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		if t == '{' {
			v := &jval{kind: 'o'}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				x, err := readVal(dec)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k.(string))
				v.vals = append(v.vals, x)
			}
			_, err := dec.Token()
			return v, err
		}
		v := &jval{kind: 'a'}
		for dec.More() {
			x, err := readVal(dec)
			if err != nil {
				return nil, err
			}
			v.vals = append(v.vals, x)
		}
		_, err := dec.Token()
		return v, err
	case string:
		return &jval{kind: 's', str: t}, nil
	case json.Number:
		return &jval{kind: 'n', str: t.String()}, nil
	case bool:
		return &jval{kind: 'b', b: t}, nil
	}
	return &jval{kind: 'z'}, nil
}

// get returns the member k of an object (nil when absent).
func (v *jval) get(k string) *jval {
	if v == nil || v.kind != 'o' {
		return nil
	}
	for i, key := range v.keys {
		if key == k {
			return v.vals[i]
		}
	}
	return nil
}

// encode writes v as compact JSON, members in their order.
func (v *jval) encode(sb *strings.Builder) {
	switch v.kind {
	case 'o':
		sb.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(quote(k))
			sb.WriteByte(':')
			v.vals[i].encode(sb)
		}
		sb.WriteByte('}')
	case 'a':
		sb.WriteByte('[')
		for i, x := range v.vals {
			if i > 0 {
				sb.WriteByte(',')
			}
			x.encode(sb)
		}
		sb.WriteByte(']')
	case 's':
		sb.WriteString(quote(v.str))
	case 'n':
		sb.WriteString(v.str)
	case 'b':
		if v.b {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	default:
		sb.WriteString("null")
	}
}

func (v *jval) text() string {
	var sb strings.Builder
	v.encode(&sb)
	return sb.String()
}

// quote is a JSON string literal without HTML escaping.
func quote(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}
