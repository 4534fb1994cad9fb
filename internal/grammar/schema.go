package grammar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// SchemaError is a schema the compiler cannot turn into an automaton.
// Path is the JSON pointer of the offending subschema ("" for the root).
type SchemaError struct {
	Path string
	Msg  string
}

func (e *SchemaError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// unsupported are validation keywords the automaton cannot enforce. A
// schema using one is refused rather than half-enforced, so that what the
// matcher lets through always validates.
var unsupported = []string{
	"not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies",
	"patternProperties", "propertyNames", "unevaluatedProperties", "unevaluatedItems",
	"contains", "minContains", "maxContains", "minProperties", "maxProperties",
	"multipleOf", "prefixItems", "$dynamicRef", "$recursiveRef",
}

// structural keywords: with anyOf or $ref beside them the schema would be
// an intersection, which is refused.
var structural = []string{
	"type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
	"enum", "const", "minLength", "maxLength", "pattern", "minimum", "maximum",
	"exclusiveMinimum", "exclusiveMaximum",
}

// compiler turns one schema into NFA fragments.
type compiler struct {
	n    *nfa
	root *jval
	opts Options
	refs map[string]int // expansions of each $ref under way
	err  error
}

func (c *compiler) fail(path, format string, args ...any) frag {
	if c.err == nil {
		c.err = &SchemaError{Path: path, Msg: fmt.Sprintf(format, args...)}
	}
	return c.n.none()
}

// schema compiles s; depth is the nesting left for untyped values.
func (c *compiler) schema(s *jval, path string, depth int) frag {
	if c.err != nil || c.n.err != nil {
		return c.n.none()
	}
	switch {
	case s.kind == 'b' && s.b:
		return c.n.anyValue(max(depth, 0))
	case s.kind == 'b':
		return c.n.none()
	case !c.supported(s, path):
		return c.n.none()
	}
	if r := s.get("$ref"); r != nil {
		return c.ref(s, r, path, depth)
	}
	if a := s.get("allOf"); a != nil {
		if a.kind != 'a' || len(a.vals) != 1 || c.hasAny(s, structural) {
			return c.fail(path, "allOf is supported only with a single subschema and nothing beside it")
		}
		return c.schema(a.vals[0], path+"/allOf/0", depth)
	}
	if a := s.get("anyOf"); a != nil {
		return c.anyOf(s, a, path+"/anyOf", depth)
	}
	if a := s.get("oneOf"); a != nil {
		// Exactly one alternative must validate: safe as anyOf only when
		// the alternatives exclude each other.
		if a.kind == 'a' && len(a.vals) > 1 && !discriminated(a.vals) {
			return c.fail(path+"/oneOf", "oneOf is supported only for one alternative or objects told apart by a required const property (a discriminated union); use anyOf")
		}
		return c.anyOf(s, a, path+"/oneOf", depth)
	}
	if v := s.get("const"); v != nil {
		return c.n.lit(c.n.valueText(v))
	}
	if e := s.get("enum"); e != nil {
		if e.kind != 'a' || len(e.vals) == 0 {
			return c.fail(path+"/enum", "enum must be a non-empty array")
		}
		alts := make([]frag, len(e.vals))
		for i, v := range e.vals {
			alts[i] = c.n.lit(c.n.valueText(v))
		}
		return c.n.alt(alts...)
	}
	return c.typed(s, path, depth)
}

// supported checks that s is an object schema without keywords the
// automaton cannot enforce (recording the error when not).
func (c *compiler) supported(s *jval, path string) bool {
	if s.kind != 'o' {
		c.fail(path, "a schema must be an object or a boolean")
		return false
	}
	for _, k := range unsupported {
		if s.get(k) != nil {
			c.fail(path, "the keyword %q is not supported in constrained decoding", k)
			return false
		}
	}
	if u := s.get("uniqueItems"); u != nil && u.kind == 'b' && u.b {
		c.fail(path, "the keyword \"uniqueItems\" is not supported in constrained decoding")
		return false
	}
	return true
}

func (c *compiler) hasAny(s *jval, keys []string) bool {
	return slices.ContainsFunc(keys, func(k string) bool { return s.get(k) != nil })
}

func (c *compiler) anyOf(s, a *jval, path string, depth int) frag {
	if a.kind != 'a' || len(a.vals) == 0 {
		return c.fail(path, "must be a non-empty array")
	}
	if c.hasAny(s, structural) {
		return c.fail(path, "anyOf/oneOf beside other validation keywords is not supported: move them into each alternative")
	}
	alts := make([]frag, len(a.vals))
	for i, v := range a.vals {
		alts[i] = c.schema(v, path+"/"+strconv.Itoa(i), depth)
	}
	return c.n.alt(alts...)
}

// discriminated reports whether alts are objects that share a required
// property whose const (or one-value enum) differs in each: at most one
// of them can validate.
func discriminated(alts []*jval) bool {
	first := alts[0].get("properties")
	if first == nil {
		return false
	}
	for _, key := range first.keys {
		seen := map[string]bool{}
		ok := true
		for _, a := range alts {
			v, req := discriminator(a, key)
			if !req || seen[v] {
				ok = false
				break
			}
			seen[v] = true
		}
		if ok {
			return true
		}
	}
	return false
}

// discriminator is the single value a required property key of object
// schema a may take.
func discriminator(a *jval, key string) (string, bool) {
	p := a.get("properties").get(key)
	r := a.get("required")
	if p == nil || r == nil || r.kind != 'a' || !slices.ContainsFunc(r.vals, func(x *jval) bool { return x.kind == 's' && x.str == key }) {
		return "", false
	}
	if c := p.get("const"); c != nil {
		return c.text(), true
	}
	if e := p.get("enum"); e != nil && e.kind == 'a' && len(e.vals) == 1 {
		return e.vals[0].text(), true
	}
	return "", false
}

// ref follows a local reference ("#", "#/$defs/x", "#/definitions/x",
// any JSON pointer into the document). A recursive reference is unrolled
// Options.MaxRefDepth times; past that it matches nothing, so the
// alternatives that would recurse further are cut off.
func (c *compiler) ref(s, r *jval, path string, depth int) frag {
	if r.kind != 's' || !strings.HasPrefix(r.str, "#") {
		return c.fail(path+"/$ref", "only local references (#...) are supported")
	}
	if c.hasAny(s, structural) {
		return c.fail(path, "$ref beside other validation keywords is not supported")
	}
	target, err := pointer(c.root, r.str[1:])
	if err != nil {
		return c.fail(path+"/$ref", "%v", err)
	}
	if c.refs[r.str] >= c.opts.MaxRefDepth {
		return c.n.none()
	}
	c.refs[r.str]++
	defer func() { c.refs[r.str]-- }()
	return c.schema(target, r.str, depth)
}

// pointer resolves a JSON pointer (RFC 6901) in v.
func pointer(v *jval, p string) (*jval, error) {
	if p == "" {
		return v, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("reference %q is not a JSON pointer", "#"+p)
	}
	for _, part := range strings.Split(p[1:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		var next *jval
		switch v.kind {
		case 'o':
			next = v.get(part)
		case 'a':
			if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(v.vals) {
				next = v.vals[i]
			}
		}
		if next == nil {
			return nil, fmt.Errorf("reference %q does not resolve", "#"+p)
		}
		v = next
	}
	return v, nil
}

// typed compiles a schema by its "type" (a name or a list of names; when
// absent, inferred from the keywords, else any value).
func (c *compiler) typed(s *jval, path string, depth int) frag {
	t := s.get("type")
	var names []string
	switch {
	case t == nil:
		names = []string{inferType(s)}
	case t.kind == 's':
		names = []string{t.str}
	case t.kind == 'a' && len(t.vals) > 0:
		for _, x := range t.vals {
			if x.kind != 's' {
				return c.fail(path+"/type", "type names must be strings")
			}
			names = append(names, x.str)
		}
	default:
		return c.fail(path+"/type", "type must be a string or a non-empty array of strings")
	}
	alts := make([]frag, 0, len(names))
	for _, name := range names {
		alts = append(alts, c.oneType(s, name, path, depth))
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return c.n.alt(alts...)
}

func inferType(s *jval) string {
	switch {
	case s.get("properties") != nil || s.get("required") != nil || s.get("additionalProperties") != nil:
		return "object"
	case s.get("items") != nil || s.get("minItems") != nil || s.get("maxItems") != nil:
		return "array"
	case s.get("minLength") != nil || s.get("maxLength") != nil || s.get("pattern") != nil:
		return "string"
	case s.get("minimum") != nil || s.get("maximum") != nil || s.get("exclusiveMinimum") != nil || s.get("exclusiveMaximum") != nil:
		return "number"
	}
	return "any"
}

func (c *compiler) oneType(s *jval, name, path string, depth int) frag {
	n := c.n
	switch name {
	case "any":
		return n.anyValue(max(depth, 0))
	case "null":
		return n.lit("null")
	case "boolean":
		return n.alt(n.lit("true"), n.lit("false"))
	case "string":
		return c.str(s, path)
	case "integer", "number":
		return c.num(s, name, path)
	case "object":
		return c.object(s, path, depth)
	case "array":
		return c.array(s, path, depth)
	}
	return c.fail(path+"/type", "unknown type %q", name)
}

// count reads a non-negative integer keyword; def when absent.
func (c *compiler) count(s *jval, key, path string, def int) int {
	v := s.get(key)
	if v == nil {
		return def
	}
	i, err := strconv.Atoi(v.str)
	if v.kind != 'n' || err != nil || i < 0 {
		c.fail(path+"/"+key, "must be a non-negative integer")
		return def
	}
	return i
}

func (c *compiler) str(s *jval, path string) frag {
	if q := c.n.gemmaQuote; q != "" {
		return c.n.seq(c.n.lit(q), c.n.avoid(c.strContent(s, path, true), gemmaQuoteText), c.n.lit(q))
	}
	return c.strContent(s, path, false)
}

// strContent is a string of schema s: JSON, or with raw set its
// characters unescaped and without quotes.
func (c *compiler) strContent(s *jval, path string, raw bool) frag {
	lo, hi := c.count(s, "minLength", path, 0), c.count(s, "maxLength", path, -1)
	if hi >= 0 && hi < lo {
		return c.n.none()
	}
	if p := s.get("pattern"); p != nil {
		if p.kind != 's' {
			return c.fail(path+"/pattern", "must be a string")
		}
		if lo > 0 || hi >= 0 {
			return c.fail(path, "pattern together with minLength/maxLength is not supported")
		}
		var f frag
		var err error
		if raw {
			f, err = patternContent(c.n, p.str, true)
		} else {
			f, err = patternString(c.n, p.str)
		}
		if err != nil {
			return c.fail(path+"/pattern", "%v", err)
		}
		return f
	}
	if raw {
		return c.n.repeat((*nfa).rawChar, lo, hi)
	}
	return c.n.jsonString(lo, hi)
}

func (c *compiler) num(s *jval, name, path string) frag {
	if name == "integer" {
		return c.intRange(s, path)
	}
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if s.get(k) != nil {
			return c.fail(path+"/"+k, "bounds on non-integer numbers are not supported in constrained decoding")
		}
	}
	return c.n.number()
}

func (c *compiler) array(s *jval, path string, depth int) frag {
	lo, hi := c.count(s, "minItems", path, 0), c.count(s, "maxItems", path, -1)
	if hi >= 0 && hi < lo {
		return c.n.none()
	}
	items := s.get("items")
	if items == nil {
		items = &jval{kind: 'b', b: true}
	}
	item := func(*nfa) frag { return c.schema(items, path+"/items", depth-1) }
	n := c.n
	return n.seq(n.lit("["), n.list(item, lo, hi), n.lit("]"))
}
