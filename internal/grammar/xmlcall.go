package grammar

import (
	"sort"
	"strings"
)

// qwenXMLCall is Qwen 3.5's / Qwen3-Coder's call, one element per
// argument:
//
//	<tool_call>
//	<function=NAME>
//	<parameter=city>
//	Paris
//	</parameter>
//	</function>
//	</tool_call>
//
// The parser (internal/toolcall's qwen3_coder) reads a parameter whose
// schema has "type": "string" as its bare text, and any other as JSON, so
// string parameters are written unescaped and the rest as JSON values. A
// value must not spell "</parameter>", where the parser ends it.
func qwenXMLCall(c *compiler, name string, p *jval, mk func(string) string) frag {
	if !xmlName(name) {
		return c.fail("", "the function name %q cannot be written in the qwen3_coder syntax", name)
	}
	n := c.n
	return n.seq(n.lit(mk("<tool_call>")+"\n<function="+name+">\n"), c.xmlParams(p), n.lit("</function>\n"+mk("</tool_call>")))
}

// xmlName reports whether s can be a function or parameter name between
// "=" and ">" (the parser trims it and ends it at the first '>').
func xmlName(s string) bool {
	return s != "" && strings.TrimSpace(s) == s && !strings.ContainsAny(s, ">\n")
}

// xmlParams writes the properties in the schema's order, optional ones
// skippable. No undeclared ones: leaving them out always validates.
func (c *compiler) xmlParams(p *jval) frag {
	n := c.n
	if p.kind == 'b' {
		if !p.b {
			return n.none()
		}
		return n.empty()
	}
	if !c.objectSchema(p) {
		return n.none()
	}
	props := p.get("properties")
	if props != nil && props.kind != 'o' {
		return c.fail("/properties", "must be an object")
	}
	var keys []string
	var schemas []*jval
	if props != nil {
		keys, schemas = props.keys, props.vals
	}
	required := map[string]bool{}
	if r := p.get("required"); r != nil {
		if r.kind != 'a' {
			return c.fail("/required", "must be an array of strings")
		}
		for _, x := range r.vals {
			required[x.str] = true
		}
	}
	// A required name without a property schema takes the
	// additionalProperties schema (any value when absent), as in object.
	extra := p.get("additionalProperties")
	if extra == nil {
		extra = &jval{kind: 'b', b: true}
	}
	var missing []string
	for k := range required {
		if props.get(k) == nil {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		keys, schemas = append(keys[:len(keys):len(keys)], k), append(schemas[:len(schemas):len(schemas)], extra)
	}
	parts := make([]frag, 0, len(keys))
	for i, k := range keys {
		path := "/properties/" + k
		if !xmlName(k) {
			if required[k] {
				return c.fail(path, "the parameter name %q cannot be written in the qwen3_coder syntax", k)
			}
			continue
		}
		v := n.avoid(c.xmlValue(schemas[i], path), "</parameter>")
		m := n.seq(n.lit("<parameter="+k+">\n"), v, n.lit("\n</parameter>\n"))
		if !required[k] {
			m = n.opt(m)
		}
		parts = append(parts, m)
	}
	return n.seq(parts...)
}

// xmlValue is one parameter's value: a "type": "string" schema's string
// unescaped, any other schema's JSON value.
func (c *compiler) xmlValue(s *jval, path string) frag {
	if t := s.get("type"); t == nil || t.kind != 's' || t.str != "string" {
		return c.schema(s, path, c.opts.MaxDepth-1)
	}
	n := c.n
	if !c.supported(s, path) {
		return n.none()
	}
	if c.hasAny(s, []string{"$ref", "anyOf", "oneOf", "allOf"}) {
		return c.fail(path, "$ref, anyOf, oneOf or allOf beside \"type\" is not supported")
	}
	var vals []*jval
	if v := s.get("const"); v != nil {
		vals = []*jval{v}
	} else if e := s.get("enum"); e != nil {
		if e.kind != 'a' {
			return c.fail(path+"/enum", "enum must be a non-empty array")
		}
		vals = e.vals
	} else {
		return c.strContent(s, path, true)
	}
	var alts []frag
	for _, v := range vals {
		if v.kind == 's' {
			alts = append(alts, n.lit(v.str))
		}
	}
	if len(alts) == 0 {
		return n.none()
	}
	return n.alt(alts...)
}
