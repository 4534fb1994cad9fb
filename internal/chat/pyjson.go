package chat

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// transformers replaces jinja's tojson with
//
//	json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)
//
// and tool schemas reach the prompt through it, so its exact spelling (", "
// and ": " separators, no HTML escaping, raw non-ASCII, Python float repr,
// insertion key order) is part of the prompt. The engine's own tojson differs
// in several of these, so templates are pointed at this one instead (see
// rewrite.go).

// pyJSONOptions mirrors the keyword arguments of transformers' tojson.
type pyJSONOptions struct {
	ensureASCII bool
	indent      *string // nil: compact; otherwise the per-level indent
	itemSep     string
	keySep      string
	sortKeys    bool
}

// tojsonFilter is the filter callable handed to templates. Positional
// arguments follow transformers' signature: (x, ensure_ascii, indent,
// separators, sort_keys).
func tojsonFilter(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), fmt.Errorf("tojson: missing value")
	}
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	params := map[string]jinja.Value{}
	for i, a := range args[1:] {
		if i >= len(names) {
			return jinja.Undefined(), fmt.Errorf("tojson: too many arguments")
		}
		params[names[i]] = a
	}
	for k, v := range kwargs {
		if !slices.Contains(names, k) {
			return jinja.Undefined(), fmt.Errorf("tojson: unexpected keyword argument %q", k)
		}
		params[k] = v
	}

	opts := pyJSONOptions{}
	if v, ok := params["ensure_ascii"]; ok {
		opts.ensureASCII = v.IsTruthy()
	}
	if v, ok := params["sort_keys"]; ok {
		opts.sortKeys = v.IsTruthy()
	}
	if v, ok := params["indent"]; ok && !v.IsNone() && !v.IsUndefined() {
		var ind string
		switch {
		case v.IsInt():
			// Python: ' ' * indent, so a negative indent means no spaces.
			ind = strings.Repeat(" ", int(max(v.AsInt(), 0)))
		case v.IsString():
			ind = v.AsString()
		default:
			return jinja.Undefined(), fmt.Errorf("tojson: indent must be an int or a string")
		}
		opts.indent = &ind
	}
	// json.dumps drops the space after ',' when indenting, since a newline
	// follows anyway.
	opts.itemSep, opts.keySep = ", ", ": "
	if opts.indent != nil {
		opts.itemSep = ","
	}
	if v, ok := params["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Undefined(), fmt.Errorf("tojson: separators must be a pair of strings")
		}
		opts.itemSep = v.AsList().Get(0).AsString()
		opts.keySep = v.AsList().Get(1).AsString()
	}

	var sb strings.Builder
	if err := writePyJSON(&sb, args[0], opts, 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(sb.String()), nil
}

func writePyJSON(sb *strings.Builder, v jinja.Value, o pyJSONOptions, level int) error {
	switch {
	case v.IsNone():
		sb.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case v.IsInt():
		sb.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		sb.WriteString(pyFloatJSON(v.AsFloat()))
	case v.IsString():
		writePyJSONString(sb, v.AsString(), o.ensureASCII)
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			sb.WriteString("[]")
			return nil
		}
		sb.WriteByte('[')
		for i, item := range items {
			if i > 0 {
				sb.WriteString(o.itemSep)
			}
			writeNewlineIndent(sb, o, level+1)
			if err := writePyJSON(sb, item, o, level+1); err != nil {
				return err
			}
		}
		writeNewlineIndent(sb, o, level)
		sb.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			sb.WriteString("{}")
			return nil
		}
		if o.sortKeys {
			slices.Sort(keys)
		}
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteString(o.itemSep)
			}
			writeNewlineIndent(sb, o, level+1)
			writePyJSONString(sb, k, o.ensureASCII)
			sb.WriteString(o.keySep)
			val, _ := d.Get(k)
			if err := writePyJSON(sb, val, o, level+1); err != nil {
				return err
			}
		}
		writeNewlineIndent(sb, o, level)
		sb.WriteByte('}')
	case v.IsUndefined():
		// json.dumps raises TypeError on jinja's Undefined, failing the render.
		return fmt.Errorf("tojson: Object of type Undefined is not JSON serializable")
	default:
		return fmt.Errorf("tojson: value %s is not JSON serializable", v.String())
	}
	return nil
}

func writeNewlineIndent(sb *strings.Builder, o pyJSONOptions, level int) {
	if o.indent == nil {
		return
	}
	sb.WriteByte('\n')
	for range level {
		sb.WriteString(*o.indent)
	}
}

// writePyJSONString follows json.dumps' string escaping: '"', '\\' and the
// C0 controls always (with the short forms \n \r \t \b \f), everything
// outside printable ASCII too when ensure_ascii is set, as \uXXXX with
// lowercase hex and surrogate pairs above the BMP. Unlike Go's encoder it
// leaves '<', '>', '&', U+2028 and U+2029 alone.
func writePyJSONString(sb *strings.Builder, s string, ensureASCII bool) {
	const hex = "0123456789abcdef"
	writeU := func(r rune) {
		sb.WriteString(`\u`)
		sb.WriteByte(hex[r>>12&0xf])
		sb.WriteByte(hex[r>>8&0xf])
		sb.WriteByte(hex[r>>4&0xf])
		sb.WriteByte(hex[r&0xf])
	}
	sb.WriteByte('"')
	for _, r := range s { // invalid UTF-8 arrives as U+FFFD, as Python would never hold it
		switch r {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				writeU(r)
			case ensureASCII && r > 0x7e:
				if r > 0xffff {
					r -= 0x10000
					writeU(0xd800 + (r>>10)&0x3ff)
					writeU(0xdc00 + r&0x3ff)
				} else {
					writeU(r)
				}
			default:
				sb.WriteRune(r)
			}
		}
	}
	sb.WriteByte('"')
}

// pyFloatJSON spells a float as json.dumps does: repr() for finite values,
// NaN / Infinity / -Infinity otherwise (allow_nan defaults to True).
func pyFloatJSON(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return pyFloatRepr(f)
}

// pyFloatRepr reproduces Python's repr(float): the shortest digits that
// round-trip, in positional notation when the decimal exponent is in
// [-4, 16) and in scientific notation otherwise (at least two exponent
// digits, no ".0" on a lone mantissa digit); positional results always
// carry a fractional part ("1.0").
func pyFloatRepr(f float64) string {
	sign := ""
	if math.Signbit(f) {
		sign = "-"
		f = -f
	}
	// 'e' with precision -1 gives the shortest round-tripping digits as
	// d.ddddde±XX.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	if f == 0 {
		return sign + "0.0"
	}
	decpt := exp + 1 // position of the decimal point relative to digits
	if decpt <= -4 || decpt > 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es = "-"
			exp = -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
	}
	switch {
	case decpt <= 0:
		return sign + "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
	default:
		return sign + digits[:decpt] + "." + digits[decpt:]
	}
}
