package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// This file turns Go data into the engine's value tree so that a template
// sees what Python's jinja2 sees in transformers: dicts keep their key order
// (tojson prints them in that order, since transformers calls json.dumps with
// sort_keys=False), and ints stay distinct from floats ("1" versus "1.0").
//
// Exactness depends on what the caller hands in:
//   - json.RawMessage (anywhere: a whole extra value, a message content, a
//     value inside a tool call) is decoded keeping key order and the int/float
//     spelling of every number. This is the exact path; the server should use
//     it for request JSON such as tools and tool-call arguments.
//   - json.Number keeps the int/float spelling of its literal.
//   - Go maps have no order, so their keys are sorted with "id", "type" and
//     "name" first, which reproduces the usual OpenAI field order for tool
//     calls ({id, type, function}, {name, arguments}), content parts ({type,
//     text}) and tool schemas ({type, function}, {name, description,
//     parameters}, {type, properties, required}).
//   - A Go float64 with an integral value (|f| < 2^53) becomes an int: such
//     values nearly always come from encoding/json, which decodes every JSON
//     number to float64 and so loses the "1" versus "1.0" distinction; JSON
//     schemas are full of integral numbers and rarely spell "1.0".
//   - Structs and other types go through encoding/json, so struct fields keep
//     their declaration order.

// leadingKeys are placed first, in this order, when a Go map is converted.
var leadingKeys = map[string]int{"id": 0, "type": 1, "name": 2}

// orderedKeys returns the keys of a Go map in the order described above.
func orderedKeys(keys []string) []string {
	slices.SortFunc(keys, func(a, b string) int {
		ra, oka := leadingKeys[a]
		rb, okb := leadingKeys[b]
		switch {
		case oka && okb:
			return ra - rb
		case oka:
			return -1
		case okb:
			return 1
		}
		return strings.Compare(a, b)
	})
	return keys
}

// maxExactInt is the largest magnitude below which every integer is exactly
// representable as a float64.
const maxExactInt = 1 << 53

// toValue converts Go data into an engine value (see the file comment).
func toValue(v any) (jinja.Value, error) {
	switch x := v.(type) {
	case nil:
		return jinja.None(), nil
	case jinja.Value:
		return x, nil
	case string:
		return jinja.NewString(x), nil
	case bool:
		return jinja.NewBool(x), nil
	case int:
		return jinja.NewInt(int64(x)), nil
	case int8:
		return jinja.NewInt(int64(x)), nil
	case int16:
		return jinja.NewInt(int64(x)), nil
	case int32:
		return jinja.NewInt(int64(x)), nil
	case int64:
		return jinja.NewInt(x), nil
	case uint:
		return uintValue(uint64(x)), nil
	case uint8:
		return jinja.NewInt(int64(x)), nil
	case uint16:
		return jinja.NewInt(int64(x)), nil
	case uint32:
		return jinja.NewInt(int64(x)), nil
	case uint64:
		return uintValue(x), nil
	case float32:
		return floatValue(float64(x)), nil
	case float64:
		return floatValue(x), nil
	case json.Number:
		return numberValue(string(x)), nil
	case json.RawMessage:
		return decodeJSON(x)
	case Message:
		return messageValue(x)
	case []Message:
		items := make([]jinja.Value, len(x))
		for i, m := range x {
			mv, err := messageValue(m)
			if err != nil {
				return jinja.Undefined(), err
			}
			items[i] = mv
		}
		return jinja.NewList(items), nil
	case []any:
		items := make([]jinja.Value, len(x))
		for i, item := range x {
			iv, err := toValue(item)
			if err != nil {
				return jinja.Undefined(), err
			}
			items[i] = iv
		}
		return jinja.NewList(items), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		d := jinja.NewDict()
		for _, k := range orderedKeys(keys) {
			iv, err := toValue(x[k])
			if err != nil {
				return jinja.Undefined(), err
			}
			d.AsDict().Set(k, iv)
		}
		return d, nil
	}
	return reflectValue(v)
}

// reflectValue handles named slice and map types ([]map[string]any,
// []string, map[string]string, ...) and falls back to encoding/json for
// everything else, so structs keep their field order.
func reflectValue(v any) (jinja.Value, error) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return jinja.None(), nil
		}
	case reflect.Slice:
		if rv.IsNil() {
			return jinja.None(), nil
		}
		fallthrough
	case reflect.Array:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			break // []byte: let encoding/json spell it, as it would on the wire
		}
		items := make([]jinja.Value, rv.Len())
		for i := range rv.Len() {
			iv, err := toValue(rv.Index(i).Interface())
			if err != nil {
				return jinja.Undefined(), err
			}
			items[i] = iv
		}
		return jinja.NewList(items), nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		if rv.IsNil() {
			return jinja.None(), nil
		}
		keys := make([]string, 0, rv.Len())
		byKey := make(map[string]reflect.Value, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			k := it.Key().String()
			keys = append(keys, k)
			byKey[k] = it.Value()
		}
		d := jinja.NewDict()
		for _, k := range orderedKeys(keys) {
			iv, err := toValue(byKey[k].Interface())
			if err != nil {
				return jinja.Undefined(), err
			}
			d.AsDict().Set(k, iv)
		}
		return d, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("chat: cannot pass %T to a template: %w", v, err)
	}
	return decodeJSON(raw)
}

func uintValue(u uint64) jinja.Value {
	if u > math.MaxInt64 {
		return jinja.NewFloat(float64(u))
	}
	return jinja.NewInt(int64(u))
}

// floatValue applies the integral-float rule from the file comment.
func floatValue(f float64) jinja.Value {
	if f == math.Trunc(f) && math.Abs(f) < maxExactInt && !(f == 0 && math.Signbit(f)) {
		return jinja.NewInt(int64(f))
	}
	return jinja.NewFloat(f)
}

// numberValue follows Python's json.loads: a literal without '.', 'e' or 'E'
// is an int, anything else a float.
func numberValue(lit string) jinja.Value {
	if !strings.ContainsAny(lit, ".eE") {
		if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return jinja.NewInt(i)
		}
		// Python ints are unbounded; a float is the closest this engine has.
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return jinja.NewString(lit)
	}
	return jinja.NewFloat(f)
}

// decodeJSON decodes one JSON document into engine values, keeping object
// key order and number spelling.
func decodeJSON(raw []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSONValue(dec)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("chat: invalid JSON value: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("chat: invalid JSON value: trailing data")
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			items := []jinja.Value{}
			for dec.More() {
				item, err := decodeJSONValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, item)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return jinja.NewList(items), nil
		}
		d := jinja.NewDict()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return jinja.Undefined(), err
			}
			key, ok := kt.(string)
			if !ok {
				return jinja.Undefined(), fmt.Errorf("object key %v is not a string", kt)
			}
			val, err := decodeJSONValue(dec)
			if err != nil {
				return jinja.Undefined(), err
			}
			// A repeated key keeps its first position and its last value,
			// as a Python dict built by json.loads does.
			d.AsDict().Set(key, val)
		}
		if _, err := dec.Token(); err != nil {
			return jinja.Undefined(), err
		}
		return d, nil
	case json.Number:
		return numberValue(string(t)), nil
	case string:
		return jinja.NewString(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}

// messageValue builds the dict a template sees for one message: role and
// content always (content None when nil), the optional OpenAI keys only when
// set, then Extra (sorted keys; an Extra key may replace a standard one).
// Templates rely on this shape: `'tool_calls' in message`, `message.content
// is string`, `message.name is defined`.
func messageValue(m Message) (jinja.Value, error) {
	d := jinja.NewDict()
	dict := d.AsDict()
	dict.Set("role", jinja.NewString(m.Role))
	content, err := toValue(m.Content)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("chat: message content: %w", err)
	}
	dict.Set("content", content)
	if m.Name != "" {
		dict.Set("name", jinja.NewString(m.Name))
	}
	if len(m.ToolCalls) > 0 {
		calls, err := toValue(m.ToolCalls)
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("chat: message tool_calls: %w", err)
		}
		dict.Set("tool_calls", calls)
	}
	if m.ToolCallID != "" {
		dict.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if len(m.Extra) > 0 {
		keys := make([]string, 0, len(m.Extra))
		for k := range m.Extra {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, err := toValue(m.Extra[k])
			if err != nil {
				return jinja.Undefined(), fmt.Errorf("chat: message %q: %w", k, err)
			}
			dict.Set(k, v)
		}
	}
	return d, nil
}
