package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The reference for every schema test is santhosh-tekuri/jsonschema, a
// maintained draft 2020-12 validator: whatever the grammar generates must
// validate; documents it validates and that are written the way the
// grammar writes JSON must be accepted.

type schemaCase struct {
	name   string
	schema string
	good   []string // canonical valid documents: must be accepted
	bad    []string // must be refused (invalid, or not how the grammar writes)
}

var schemaCases = []schemaCase{
	{name: "object", schema: `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["a"]}`,
		good: []string{`{"a":1}`, `{"a": -5, "b": "x"}`, `{"a":0,"b":"","c":false}`, `{"a":1, "c":true}`},
		bad:  []string{`{}`, `{"b":"x"}`, `{"a":1.5}`, `{"a":1,"d":2}`, `{"b":"x","a":1}`, `{ "a":1}`, `{"a":1}  `, `{"a":01}`}},
	{name: "additional", schema: `{"type":"object","properties":{"id":{"type":"integer"}},"additionalProperties":{"type":"string"}}`,
		good: []string{`{}`, `{"id":3,"x":"y"}`, `{"zz":"a", "yy":"b"}`},
		bad:  []string{`{"x":1}`, `{"id":"3"}`, `{"id":3,"id":4}`}},
	{name: "additional-true", schema: `{"type":"object","additionalProperties":true}`,
		good: []string{`{}`, `{"a":[1,{"b":null}],"c":"d"}`}, bad: []string{`[]`, `"a"`}},
	{name: "array", schema: `{"type":"array","items":{"type":"number"},"minItems":2,"maxItems":4}`,
		good: []string{`[1,2]`, `[1.5, -2e10, 0.25, 3]`}, bad: []string{`[1]`, `[1,2,3,4,5]`, `[1,"a"]`, `[]`, `[1e100,1]`, `[1,01]`}},
	{name: "enum-const", schema: `{"type":"object","properties":{"k":{"enum":["red","green",3,null,{"x":1}]},"v":{"const":"fixed"}},"required":["k","v"]}`,
		good: []string{`{"k":"red","v":"fixed"}`, `{"k":3,"v":"fixed"}`, `{"k":null, "v":"fixed"}`, `{"k":{"x":1},"v":"fixed"}`},
		bad:  []string{`{"k":"blue","v":"fixed"}`, `{"k":"red","v":"other"}`}},
	{name: "anyOf", schema: `{"anyOf":[{"type":"string","maxLength":3},{"type":"integer","minimum":10,"maximum":20},{"type":"null"}]}`,
		good: []string{`"abc"`, `""`, `10`, `15`, `20`, `null`}, bad: []string{`"abcd"`, `9`, `21`, `true`}},
	{name: "strings", schema: `{"type":"array","items":{"type":"string","minLength":2,"maxLength":3}}`,
		good: []string{`["ab","abc","\u00e9\u00e9","é✓"]`, `["a\"b", "\\n"]`}, bad: []string{`["a"]`, `["abcd"]`, `["\ud800x"]`}},
	{name: "pattern", schema: `{"type":"object","properties":{"email":{"type":"string","pattern":"^[a-z]+@[a-z]+\\.(com|org)$"},"code":{"type":"string","pattern":"[0-9]{3}"}},"required":["email","code"]}`,
		good: []string{`{"email":"a@b.com","code":"123"}`, `{"email":"xy@zz.org","code":"ab123cd"}`},
		bad:  []string{`{"email":"a@b.net","code":"123"}`, `{"email":"a@b.com","code":"12"}`}},
	{name: "integer-ranges", schema: `{"type":"array","items":[]}`}, // replaced below
	{name: "types", schema: `{"type":["string","null","boolean"]}`, good: []string{`"x"`, `null`, `true`}, bad: []string{`1`, `{}`}},
	{name: "nesting", schema: `{"type":"object","properties":{"user":{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},"required":["name","tags"]}},"required":["user"]}`,
		good: []string{`{"user":{"name":"n","tags":[]}}`, `{"user": {"name": "n", "tags": ["a", "b"]}}`}, bad: []string{`{"user":{"name":"n","tags":["c"]}}`}},
	{name: "refs", schema: `{"$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x","y"]}},"type":"object","properties":{"a":{"$ref":"#/$defs/pt"},"b":{"$ref":"#/$defs/pt"}},"required":["a"]}`,
		good: []string{`{"a":{"x":1,"y":2}}`, `{"a":{"x":1,"y":2},"b":{"x":3,"y":4}}`}, bad: []string{`{"a":{"x":1}}`}},
	{name: "recursive-ref", schema: `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}},"required":["v"]}},"$ref":"#/$defs/node"}`,
		good: []string{`{"v":1}`, `{"v":1,"next":{"v":2,"next":{"v":3}}}`}, bad: []string{`{"next":{"v":1}}`}},
	{name: "oneOf-discriminated", schema: `{"oneOf":[{"type":"object","properties":{"kind":{"const":"cat"},"lives":{"type":"integer","minimum":0,"maximum":9}},"required":["kind","lives"]},{"type":"object","properties":{"kind":{"enum":["dog"]},"good":{"type":"boolean"}},"required":["kind"]}]}`,
		good: []string{`{"kind":"cat","lives":9}`, `{"kind":"dog"}`, `{"kind":"dog","good":true}`}, bad: []string{`{"kind":"cat"}`, `{"kind":"cow"}`}},
	{name: "required-undeclared", schema: `{"type":"object","properties":{"a":{"type":"null"}},"required":["b"]}`,
		good: []string{`{"b":1}`, `{"a":null,"b":[true]}`}, bad: []string{`{"a":null}`}},
	{name: "dot", schema: `{"type":"string","pattern":"^a.b$"}`, good: []string{`"axb"`, `"a\tb"`}, bad: []string{`"a\nb"`, `"a\rb"`, `"ab"`}},
	{name: "any", schema: `{}`, good: []string{`1`, `"s"`, `[1,[2,[3]]]`, `{"a":{"b":{"c":{"d":1}}}}`}, bad: []string{`[1,]`, `{"a"}`, `tru`}},
}

func init() {
	for i := range schemaCases {
		if schemaCases[i].name == "integer-ranges" {
			schemaCases[i] = schemaCase{name: "integer-ranges",
				schema: `{"type":"array","prefixItemsNot":0,"items":{"anyOf":[{"type":"integer","minimum":-123,"maximum":-7},{"type":"integer","exclusiveMinimum":99,"maximum":1005},{"type":"integer","minimum":123456789012}]}}`,
				good:   []string{`[-123,-7,-50,100,1005,999,123456789012,9223372036854775807]`},
				bad:    []string{`[-124]`, `[-6]`, `[99]`, `[1006]`, `[0]`, `[123456789011]`, `[-0]`}}
		}
	}
}

func validator(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// valid parses doc as JSON and validates it with the reference.
func valid(v *jsonschema.Schema, doc []byte) error {
	x, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return v.Validate(x)
}

func TestSchemasAgainstValidator(t *testing.T) {
	for _, c := range schemaCases {
		t.Run(c.name, func(t *testing.T) {
			g, err := CompileSchema([]byte(c.schema), Options{})
			if err != nil {
				t.Fatal(err)
			}
			v := validator(t, c.schema)
			for _, d := range c.good {
				if err := valid(v, []byte(d)); err != nil {
					t.Fatalf("test case %s is not valid for the reference: %v", d, err)
				}
				if !g.Accepts([]byte(d)) {
					t.Errorf("refused the valid %s", d)
				}
			}
			for _, d := range c.bad {
				if g.Accepts([]byte(d)) {
					t.Errorf("accepted %s", d)
				}
			}
			r := rand.New(rand.NewPCG(1, uint64(len(c.name))))
			dist := g.distances()
			for i := range 300 {
				doc := g.sample(r, dist, 10+i%60)
				if err := valid(v, doc); err != nil {
					t.Fatalf("generated %s, which the reference refuses: %v", doc, err)
				}
			}
		})
	}
}

// distances is each state's shortest distance (bytes) to acceptance.
func (g *Grammar) distances() []int {
	d := g.d
	dist := make([]int, d.numStates())
	for i := range dist {
		dist[i] = -1
		if d.accept[i] {
			dist[i] = 0
		}
	}
	for changed := true; changed; {
		changed = false
		for s := range dist {
			for c := 0; c < 256; c++ {
				if t := d.next(int32(s), byte(c)); t >= 0 && dist[t] >= 0 && (dist[s] < 0 || dist[t]+1 < dist[s]) {
					dist[s], changed = dist[t]+1, true
				}
			}
		}
	}
	return dist
}

// sample is a random walk over the automaton: random bytes for up to
// wander steps, then the shortest way to the end. Every live state can
// finish, so the walk always ends in a complete value.
func (g *Grammar) sample(r *rand.Rand, dist []int, wander int) []byte {
	var out []byte
	s := g.d.start
	for step := 0; ; step++ {
		if g.d.accept[s] && (step >= wander || r.IntN(8) == 0 || g.d.final(s)) {
			return out
		}
		var opts []byte
		for c := 0; c < 256; c++ {
			t := g.d.next(s, byte(c))
			if t >= 0 && (step < wander || dist[t] < dist[s]) {
				opts = append(opts, byte(c))
			}
		}
		c := opts[r.IntN(len(opts))]
		out = append(out, c)
		s = g.d.next(s, c)
	}
}

func TestJSONObject(t *testing.T) {
	g, err := JSONObject(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{
		`{}`: true, `{"a":1}`: true, `{"a": [1, 2, {"b": "c"}], "d": null}`: true, `{"a":{"b":{"c":{"d":1}}}}`: true,
		`[]`: false, `1`: false, `{"a":1,}`: false, `{"a":{"b":{"c":{"d":[]}}}}`: false,
	} {
		if g.Accepts([]byte(d)) != want {
			t.Errorf("Accepts(%s) = %v", d, !want)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	dist := g.distances()
	for i := range 300 {
		doc := g.sample(r, dist, i%80)
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatalf("generated %s: %v", doc, err)
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"type":"yaml"}`, `unknown type "yaml"`},
		{`{"type":"object","patternProperties":{"a":{}}}`, `"patternProperties" is not supported`},
		{`{"type":"number","minimum":0.5}`, `/minimum: bounds on non-integer numbers`},
		{`{"type":"string","pattern":"(a)\\1"}`, `/pattern: cannot compile pattern`},
		{`{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}`, `/properties/x/$ref: reference "#/$defs/missing" does not resolve`},
		{`{"$defs":{"n":{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"required":["n"]}},"$ref":"#/$defs/n"}`, `admits no value`},
		{`{"type":"string","maxLength":2,"minLength":3}`, `admits no value`},
		{`not json`, `not valid JSON`},
		{`{"oneOf":[{"type":"integer"},{"type":"number"}]}`, `/oneOf: oneOf is supported only`},
		{`{"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":false}`, `admits no value`},
		{`{"type":"array","items":{"type":"string","maxLength":100},"minItems":3000}`, `too large`},
	} {
		_, err := CompileSchema([]byte(c.schema), Options{})
		var se *SchemaError
		if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CompileSchema(%s) = %v, want a SchemaError with %q", c.schema, err, c.want)
		}
	}
}

// TestThinkingPrefix: a thought in <think>...</think> may come before the
// value (required when the prompt opened it), and cannot hide the close
// marker inside itself.
func TestThinkingPrefix(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	for _, c := range []struct {
		opened bool
		text   string
		want   bool
	}{
		{false, `{"a":1}`, true},
		{false, "<think>\nhmm, <thin </think\n</think>\n\n{\"a\":1}", true},
		{false, "<think>x</think>{\"a\":1}", true},
		{false, "<think>x</think></think>{\"a\":1}", false},
		{false, "<think>x</think>\n\n\n{\"a\":1}", false},
		{false, "hello{\"a\":1}", false},
		{true, "so </thinking? no.\n</think>\n\n{\"a\":2}", true},
		{true, `{"a":1}`, false},
		{true, "</think>{\"a\":1}", true},
	} {
		g, err := CompileSchema(schema, Options{Think: &Thinking{Open: "<think>", Close: "</think>", Opened: c.opened}})
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Accepts([]byte(c.text)); got != c.want {
			t.Errorf("opened %v: Accepts(%q) = %v, want %v", c.opened, c.text, got, c.want)
		}
	}
}
