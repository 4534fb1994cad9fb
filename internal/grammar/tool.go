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

// callSyntax is the literal text around one call's JSON in a model
// family's syntax: before, the object's opening up to the arguments, and
// after.
type callSyntax struct {
	open, argsKey, close string
}

// toolSyntaxes are the call syntaxes a forced call can be written in,
// named as internal/toolcall's parsers; each is what the family's chat
// template shows the model.
var toolSyntaxes = map[string]callSyntax{
	// Hermes / Qwen 2.5 / Qwen 3: <tool_call>\n{...}\n</tool_call>.
	"hermes": {open: "<tool_call>\n", argsKey: "arguments", close: "\n</tool_call>"},
	// Llama 3.x custom tools: bare {"name": ..., "parameters": ...}.
	"llama3_json": {argsKey: "parameters"},
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

// ToolCall compiles one call of one of tools (tool_choice "required", or
// a named function when tools holds just it) in the given syntax:
// `{"name": "NAME", "<args key>": ARGS}` with the syntax's text around
// it, ARGS constrained by the tool's parameter schema.
func ToolCall(syntax string, tools []Tool, o Options) (*Grammar, error) {
	cs, ok := toolSyntaxes[syntax]
	if !ok {
		return nil, fmt.Errorf("forced tool calls are not supported for the %q call syntax (supported: %s)",
			syntax, strings.Join(ToolSyntaxes(), ", "))
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("no tools to call")
	}
	ps := make([]piece, len(tools))
	for i, t := range tools {
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
			params = []byte(`{"type":"object"}`)
		}
		ps[i] = piece{
			prefix: cs.open + `{"name": ` + quote(t.Name) + `, "` + cs.argsKey + `": `,
			schema: params,
			suffix: "}" + cs.close,
		}
	}
	g, err := compilePieces(ps, o)
	if err != nil {
		return nil, fmt.Errorf("tool parameters: %w", err)
	}
	return g, nil
}
