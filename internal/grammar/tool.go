package grammar

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// Tool is a function a forced call may name.
type Tool struct {
	Name string
	// Parameters is the function's JSON Schema (empty: no arguments, {}).
	Parameters []byte
}

// toolSyntax builds one call of a tool in a family's syntax; mk writes a
// piece of markup (as a special token's literal where the model has it
// as one).
type toolSyntax struct {
	// markers are the markup strings the syntax writes, for the caller
	// to map the special ones (Options.Specials).
	markers []string
	call    func(c *compiler, name string, params *jval, mk func(string) string) frag
	// list is how several calls are written: open, each call, sep
	// between calls, close (nil: one after another).
	list func(o Options, mk func(string) string) (open, sep, close string)
	// single: the syntax holds one call per answer (harmony's <|call|>
	// ends the turn).
	single bool
}

// between is a list of calls written one after another, sep between.
func between(sep string) func(Options, func(string) string) (string, string, string) {
	return func(Options, func(string) string) (string, string, string) { return "", sep, "" }
}

// toolSyntaxes are the call syntaxes a forced call can be written in,
// named as internal/toolcall's parsers; each is what the family's chat
// template shows the model, read back by that parser.
var toolSyntaxes = map[string]toolSyntax{
	// Hermes / Qwen 2.5 / Qwen 3: <tool_call>\n{...}\n</tool_call>, calls
	// on their own lines as the templates render them.
	"hermes": {markers: []string{"<tool_call>", "</tool_call>"}, list: between("\n"), call: func(c *compiler, name string, p *jval, mk func(string) string) frag {
		return jsonCall(c, mk("<tool_call>")+"\n", name, "arguments", p, "}\n"+mk("</tool_call>"))
	}},
	// Llama 3.x custom tools: bare {"name": ..., "parameters": ...}; calls
	// separated by "; ", as vLLM's llama3_json parser reads them.
	"llama3_json": {list: between("; "), call: func(c *compiler, name string, p *jval, mk func(string) string) frag {
		return jsonCall(c, "", name, "parameters", p, "}")
	}},
	"mistral":     {markers: []string{"[TOOL_CALLS]", "[ARGS]"}, call: mistralCall, list: mistralList},
	"qwen3_coder": {markers: []string{"<tool_call>", "</tool_call>"}, call: qwenXMLCall, list: between("\n")},
	// Gemma 4: calls back to back, as its template renders them.
	"gemma4":  {markers: []string{"<|tool_call>", "<tool_call|>", gemmaQuoteText}, call: gemmaCall},
	"harmony": {markers: []string{"<|channel|>", "<|constrain|>", "<|message|>", "<|call|>"}, call: harmonyCall, single: true},
}

// ToolSyntaxes lists the syntaxes ToolCall supports.
func ToolSyntaxes() []string {
	var out []string
	for k := range toolSyntaxes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ToolMarkers lists the markup a syntax's forced call writes: those the
// model's tokenizer has as special tokens go in Options.Specials (and
// their ids to NewVocab), so the call is written with them.
func ToolMarkers(syntax string) []string { return toolSyntaxes[syntax].markers }

// ToolCalls compiles 1 to maxCalls calls, each of one of tools
// (tool_choice "required", or a named function when tools holds just
// it), in the given syntax, the arguments constrained by the tool's
// parameter schema; the answer ends after the last call. A syntax that
// holds one call per answer (harmony) gets one.
func ToolCalls(syntax string, tools []Tool, maxCalls int, o Options) (*Grammar, error) {
	ts, ok := toolSyntaxes[syntax]
	if !ok {
		return nil, fmt.Errorf("forced tool calls are not supported for the %q call syntax (supported: %s)",
			syntax, strings.Join(ToolSyntaxes(), ", "))
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("no tools to call")
	}
	if ts.single || maxCalls < 1 {
		maxCalls = 1
	}
	// Each call position is its own copy of the call's automaton: the
	// default bound of the whole grows with the count.
	if o.MaxDFAStates <= 0 {
		o.MaxDFAStates = defaultDFAStates * maxCalls
	}
	o = o.withDefaults()
	mk := func(s string) string {
		if id, ok := o.Specials[s]; ok {
			return SpecialLiteral(id)
		}
		return s
	}
	call, err := compileCall(ts, tools, o, mk)
	if err != nil {
		return nil, err
	}
	var open, sep, end string
	if ts.list != nil {
		open, sep, end = ts.list(o, mk)
	}
	think, err := thoughtDFA(o)
	if err != nil {
		return nil, err
	}
	if maxCalls == 1 && think == nil && open == "" && end == "" {
		return &Grammar{d: call}, nil // the chain would be the call alone
	}
	d, err := chain(callList(think, litDFA(open), call, litDFA(sep), litDFA(end), maxCalls), o.MaxDFAStates)
	if err != nil {
		return nil, fmt.Errorf("tool parameters: %w", schemaErr(err))
	}
	return &Grammar{d: d}, nil
}

// compileCall compiles one call of any of tools, once: the list's
// positions share it (chain).
func compileCall(ts toolSyntax, tools []Tool, o Options, mk func(string) string) (*dfa, error) {
	n := newNFA(o.MaxNFAStates)
	alts := make([]frag, len(tools))
	for i, t := range tools {
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
			params = []byte(`{"type":"object"}`)
		}
		root, err := parseJSON(params)
		if err != nil {
			return nil, fmt.Errorf("tool parameters: %w", &SchemaError{Msg: fmt.Sprintf("the schema is not valid JSON: %v", err)})
		}
		c := &compiler{n: n, root: root, opts: o, refs: map[string]int{}}
		alts[i] = ts.call(c, t.Name, root, mk)
		if c.err != nil {
			return nil, fmt.Errorf("tool %s parameters: %w", t.Name, c.err)
		}
	}
	d, err := determinize(n, n.alt(alts...), o.MaxDFAStates)
	if err != nil {
		return nil, fmt.Errorf("tool parameters: %w", schemaErr(err))
	}
	return d, nil
}

// callList is the parts of [thought] open call (sep call){0,calls-1}
// end: after each call but the last come the separator and the next
// call, or the end.
func callList(think, open, call, sep, end *dfa, calls int) []part {
	var parts []part
	if think != nil {
		parts = append(parts, part{d: think, next: []int{1}})
	}
	endAt := len(parts) + 2*calls // open, the calls and the separators before
	parts = append(parts, part{d: open, next: []int{len(parts) + 1}})
	for i := range calls {
		after := []int{endAt}
		if i < calls-1 {
			after = []int{len(parts) + 1, endAt}
		}
		parts = append(parts, part{d: call, next: after})
		if i < calls-1 {
			parts = append(parts, part{d: sep, next: []int{len(parts) + 1}})
		}
	}
	return append(parts, part{d: end, next: []int{-1}})
}

// jsonCall is `{"name": "NAME", "<args key>": ARGS` and suffix after the
// text open.
func jsonCall(c *compiler, open, name, argsKey string, p *jval, suffix string) frag {
	n := c.n
	return n.seq(n.lit(open+`{"name": `+quote(name)+`, "`+argsKey+`": `), c.schema(p, "", c.opts.MaxDepth), n.lit(suffix))
}

// mistralCall: NAME[ARGS]{...} after [TOOL_CALLS] where the tokenizer
// has [ARGS] (v11 on), else the older {"name": ..., "arguments": ...} in
// the [TOOL_CALLS] list (mistralList).
func mistralCall(c *compiler, name string, p *jval, mk func(string) string) frag {
	if _, v11 := c.opts.Specials["[ARGS]"]; v11 {
		if name == "" || strings.ContainsAny(name, " \n{\"[") {
			return c.fail("", "the function name %q cannot be written in Mistral's [ARGS] syntax", name)
		}
		n := c.n
		return n.seq(n.lit(mk("[TOOL_CALLS]")+name+mk("[ARGS]")), c.schema(p, "", c.opts.MaxDepth))
	}
	return jsonCall(c, "", name, "arguments", p, "}")
}

// mistralList: v11 repeats [TOOL_CALLS]NAME[ARGS]{...} (its template
// writes each call so); the older form is one JSON list,
// [TOOL_CALLS] [{...}, {...}].
func mistralList(o Options, mk func(string) string) (string, string, string) {
	if _, v11 := o.Specials["[ARGS]"]; v11 {
		return "", "", ""
	}
	return mk("[TOOL_CALLS]") + " [", ", ", "]"
}

// harmonyCall is gpt-oss's commentary message to the function, the
// arguments as JSON (which must not spell a message terminator: the
// parsers end the body at the first):
//
//	<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
func harmonyCall(c *compiler, name string, p *jval, mk func(string) string) frag {
	if name == "" || strings.ContainsAny(name, " <\n") {
		return c.fail("", "the function name %q cannot be written in the harmony syntax", name)
	}
	n := c.n
	head := mk("<|channel|>") + "commentary to=functions." + name + " " + mk("<|constrain|>") + "json" + mk("<|message|>")
	args := n.avoid(c.schema(p, "", c.opts.MaxDepth), "<|end|>", "<|call|>", "<|return|>")
	return n.seq(n.lit(head), args, n.lit(mk("<|call|>")))
}

// gemmaCall is <|tool_call>call:NAME{...}<tool_call|>, the arguments an
// object in Gemma's notation.
func gemmaCall(c *compiler, name string, p *jval, mk func(string) string) frag {
	if name == "" || strings.ContainsAny(name, "{ \n") {
		return c.fail("", "the function name %q cannot be written in Gemma's call syntax", name)
	}
	n := c.n
	n.gemmaQuote = mk(gemmaQuoteText)
	return n.seq(n.lit(mk("<|tool_call>")+"call:"+name), c.argsObject(p), n.lit(mk("<tool_call|>")))
}

// argsObject compiles parameters that must be written as an object (the
// syntaxes that spell out each argument): an object schema, or true.
func (c *compiler) argsObject(p *jval) frag {
	if p.kind == 'b' {
		if !p.b {
			return c.n.none()
		}
		p = &jval{kind: 'o'}
	}
	if !c.objectSchema(p) {
		return c.n.none()
	}
	return c.object(p, "", c.opts.MaxDepth)
}

// objectSchema checks that p is a plain object schema.
func (c *compiler) objectSchema(p *jval) bool {
	if !c.supported(p, "") {
		return false
	}
	if c.hasAny(p, []string{"$ref", "anyOf", "oneOf", "allOf", "enum", "const"}) {
		c.fail("", "this call syntax needs the parameters to be a plain object schema (properties, required), without $ref, anyOf, oneOf, allOf, enum or const at the top")
		return false
	}
	if t := p.get("type"); t != nil && !(t.kind == 's' && t.str == "object") {
		c.fail("/type", "this call syntax needs the parameters to be of type \"object\"")
		return false
	}
	return true
}
