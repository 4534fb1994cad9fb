package chat

import "strings"

// The engine resolves a filter name among its built-in filters first and only
// then among the values passed to the render, which is its extension point for
// custom filters. Its built-in tojson is not transformers' (Go float
// spelling, HTML escaping and sorted keys when indenting), and a built-in
// cannot be shadowed, so before compiling, every `| tojson` in a template's
// tags is renamed to tojsonFilterName, which the render data supplies. The
// template is otherwise compiled as written.
const tojsonFilterName = "__mlxcel_tojson"

// rerouteFilters renames `| tojson` filter applications inside {{ }} and
// {% %} tags. It scans like the engine does: tags end at the first closer
// outside a quoted string, comments are skipped, and text is left alone, so a
// literal "| tojson" in prompt text or inside a string literal is untouched.
func rerouteFilters(src string) string {
	var out strings.Builder
	out.Grow(len(src) + 64)
	i := 0
	for i < len(src) {
		open := strings.IndexByte(src[i:], '{')
		if open < 0 || i+open+1 >= len(src) {
			out.WriteString(src[i:])
			break
		}
		open += i
		closer := ""
		switch src[open+1] {
		case '{':
			closer = "}}"
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		}
		if closer == "" {
			out.WriteString(src[i : open+1])
			i = open + 1
			continue
		}
		out.WriteString(src[i : open+2])
		body := open + 2
		if closer == "#}" {
			end := strings.Index(src[body:], "#}")
			if end < 0 {
				out.WriteString(src[body:])
				break
			}
			out.WriteString(src[body : body+end+2])
			i = body + end + 2
			continue
		}
		end := tagEnd(src, body, closer)
		out.WriteString(renameInTag(src[body:end]))
		i = end
	}
	return out.String()
}

// tagEnd returns the index where the closer of a tag starting at body begins
// (or len(src) for an unclosed tag, which the engine then reports).
func tagEnd(src string, body int, closer string) int {
	for j := body; j < len(src); j++ {
		switch c := src[j]; {
		case c == '\'' || c == '"':
			j = skipString(src, j)
		case strings.HasPrefix(src[j:], closer):
			return j
		}
	}
	return len(src)
}

// skipString returns the index of the closing quote of the string literal
// opening at j (backslash escapes honoured), or len(src)-1 if unterminated.
func skipString(src string, j int) int {
	quote := src[j]
	for k := j + 1; k < len(src); k++ {
		switch src[k] {
		case '\\':
			k++
		case quote:
			return k
		}
	}
	return len(src) - 1
}

// renameInTag rewrites `|tojson` (any spacing) outside string literals.
func renameInTag(tag string) string {
	const name = "tojson"
	var out strings.Builder
	last := 0
	for j := 0; j < len(tag); j++ {
		c := tag[j]
		if c == '\'' || c == '"' {
			j = skipString(tag, j)
			continue
		}
		if c != '|' {
			continue
		}
		k := j + 1
		for k < len(tag) && (tag[k] == ' ' || tag[k] == '\t' || tag[k] == '\n' || tag[k] == '\r') {
			k++
		}
		if !strings.HasPrefix(tag[k:], name) {
			continue
		}
		after := k + len(name)
		if after < len(tag) && isIdentByte(tag[after]) {
			continue // a different filter, e.g. tojson_pretty
		}
		out.WriteString(tag[last:k])
		out.WriteString(tojsonFilterName)
		last = after
		j = after - 1
	}
	if last == 0 {
		return tag
	}
	out.WriteString(tag[last:])
	return out.String()
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
